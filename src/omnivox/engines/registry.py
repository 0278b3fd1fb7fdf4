"""Engines by name. Heavy engines import their libraries and load weights only in ``load()``."""

from __future__ import annotations

from collections.abc import Callable

from omnivox.core.config import Settings
from omnivox.engines.base import Engine
from omnivox.engines.deferred import DeferredEngine
from omnivox.protocol.control.workers import Capabilities
from omnivox.voice.llm.base import ChatLlm
from omnivox.voice.packaged import SMOLLM2_135M_GGUF, MissingModelPackage
from omnivox.voice.stack import VoiceStack, build_voice_stack, missing_models

LOCAL_ENGINE_CONTEXT_TOKENS = 4096

TEXT_STREAMING = Capabilities(streaming=True)
# Declared before load (the gateway routes on them while the engine loads): TinyEngine.capabilities.
TINY = Capabilities(streaming=True, duplex=True, vision=True)


def _echo(settings: Settings) -> Engine:
    from omnivox.engines.echo import EchoEngine

    return EchoEngine(word_delay_s=settings.echo_delay_s)


def _tiny(settings: Settings) -> Engine:
    def build() -> Engine:
        import torch

        from omnivox.engines.tiny import TinyEngine

        # a tiny model gains nothing from more threads, and several workers may share the cores:
        # one thread per worker keeps its units steady under load (figures: docs/benchmarks.md)
        torch.set_num_threads(1)
        return TinyEngine(seed=settings.tiny_seed)

    return DeferredEngine("tiny", TINY, build)


def _transformers(settings: Settings) -> Engine:
    model = settings.model
    if not model:
        raise ValueError("the transformers engine needs --model PATH (a local Hugging Face model directory)")

    def build() -> Engine:
        from omnivox.engines.hf import TransformersEngine

        return TransformersEngine.from_pretrained(model, device=settings.device)

    return DeferredEngine("transformers", TEXT_STREAMING, build)


def _minicpmo(settings: Settings) -> Engine:
    from omnivox.engines.minicpmo import CAPABILITIES

    model = settings.model
    if not model:
        raise ValueError(
            "the minicpmo engine needs --model PATH (a local MiniCPM-o 4.5 directory, with its model code)"
        )

    def build() -> Engine:
        from omnivox.engines.minicpmo import MiniCPMoEngine

        return MiniCPMoEngine(model, device=settings.device, ref_audio_path=settings.minicpmo_ref_audio)

    return DeferredEngine("minicpmo", CAPABILITIES, build)


def _local(settings: Settings) -> Engine:
    def build() -> Engine:
        from omnivox.engines.llamacpp import LlamaCppEngine

        context = settings.llm_context_tokens or LOCAL_ENGINE_CONTEXT_TOKENS
        return LlamaCppEngine.embedded(threads=settings.llm_threads, context_tokens=context)

    return DeferredEngine("local", TEXT_STREAMING, build)


def _local_llm(settings: Settings) -> ChatLlm | None:
    """The cascade's LLM when it is a local model (None: a remote or echo LLM, built by voice)."""
    if settings.llm not in ("tiny", "transformers"):
        return None
    from omnivox.engines.local_llm import LocalChatLlm

    if settings.llm == "tiny":
        from omnivox.engines.tiny import TinyEngine

        return LocalChatLlm(TinyEngine(seed=settings.tiny_seed))
    if not settings.model:
        raise ValueError("llm=transformers needs --model PATH (a local Hugging Face model directory)")
    from omnivox.engines.hf import TransformersEngine

    return LocalChatLlm(TransformersEngine.from_pretrained(settings.model, device=settings.device))


def _cascade(settings: Settings) -> Engine:
    from omnivox.engines.cascade import CascadeEngine

    def build_stack() -> VoiceStack:
        return build_voice_stack(settings, llm=_local_llm(settings))

    return CascadeEngine(build_stack)


def _pipeline(settings: Settings) -> Engine:
    from omnivox.engines.pipeline import PipelineEngine

    return PipelineEngine(settings)


ENGINES: dict[str, Callable[[Settings], Engine]] = {
    "echo": _echo,
    "tiny": _tiny,
    "transformers": _transformers,
    "cascade": _cascade,
    "minicpmo": _minicpmo,
    "local": _local,
    "pipeline": _pipeline,
}


def missing_packages(settings: Settings) -> list[MissingModelPackage]:
    """The model packages the engine ``settings`` names needs and this machine lacks (nothing loads:
    a server checks this before it starts, so a missing package stops it with the pip command)."""
    if settings.engine == "cascade":
        return missing_models(settings)
    if settings.engine == "pipeline":  # the worker's own: VAD (in a wheel) and smart-turn
        return [m for m in missing_models(settings) if m.package == "pipecat-ai"]
    if settings.engine == "local":
        try:
            SMOLLM2_135M_GGUF.path()
        except MissingModelPackage as err:
            return [err]
    return []


# Engines one worker process may host several seats of (``--seats``): their models live outside the
# session (the pipeline's stages; the echo engine has none), so the seats share them safely. The
# in-process engines' models (llama.cpp, Whisper, torch) are one stream's at a time: a seat each
# would load them again per seat, and sharing them would need their calls serialised.
SEATED_ENGINES = ("pipeline", "echo")


def seats_refusal(engine: str, seats: int) -> str | None:
    """Why a worker process of ``engine`` cannot host ``seats`` seats (None: it can)."""
    if seats == 1 or engine in SEATED_ENGINES:
        return None
    return (
        f"--seats {seats} needs an engine whose models live outside the session "
        f"({' or '.join(SEATED_ENGINES)}; e.g. serve --pipeline cascade); the {engine} engine's "
        "in-process models serve one session at a time: run one worker process per session instead"
    )


def build_seat_engines(settings: Settings) -> list[Engine]:
    """One engine per seat of the worker process (``settings.seats``), not yet loaded; the pipeline's
    seats share one link to the stages (``PipelineLink``). ``ValueError`` for an engine that cannot
    host seats (``seats_refusal``)."""
    refusal = seats_refusal(settings.engine, settings.seats)
    if refusal:
        raise ValueError(refusal)
    if settings.seats == 1:
        return [build_engine(settings)]
    if settings.engine == "pipeline":
        from omnivox.engines.pipeline import PipelineEngine, PipelineLink

        link = PipelineLink(settings)
        return [PipelineEngine(settings, link, seat=i) for i in range(settings.seats)]
    return [build_engine(settings) for _ in range(settings.seats)]


def build_engine(settings: Settings) -> Engine:
    """The engine ``settings.engine`` names, not yet loaded (the worker loads it in a thread)."""
    try:
        factory = ENGINES[settings.engine]
    except KeyError:
        raise ValueError(f"unknown engine {settings.engine!r}; choose from {sorted(ENGINES)}") from None
    return factory(settings)
