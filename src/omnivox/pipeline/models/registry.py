"""Stage models by name: the scheduler a spec's stage runs (``model`` picks, ``scheduler`` must match).

Heavy models import their libraries only when built, in the stage process that serves them.
"""

from __future__ import annotations

from collections.abc import Callable

from omnivox.core.config import Settings
from omnivox.pipeline.builtin import BUILTIN_MODELS, build_builtin
from omnivox.pipeline.scheduler import Scheduler
from omnivox.pipeline.spec import StageSpec

Factory = Callable[[StageSpec, Settings], Scheduler]


def _whisper(spec: StageSpec, settings: Settings) -> Scheduler:
    from omnivox.pipeline.models.asr import whisper_stage

    return whisper_stage(spec, settings)


def _llamacpp(spec: StageSpec, settings: Settings) -> Scheduler:
    from omnivox.pipeline.models.llm import llamacpp_stage

    return llamacpp_stage(spec, settings)


def _chat(spec: StageSpec, settings: Settings) -> Scheduler:
    from omnivox.pipeline.models.llm import chat_stage

    return chat_stage(spec, settings)


def _openai_llm(spec: StageSpec, settings: Settings) -> Scheduler:
    from omnivox.pipeline.models.llm import openai_stage

    return openai_stage(spec, settings)


def _hibari(spec: StageSpec, settings: Settings) -> Scheduler:
    from omnivox.pipeline.models.tts import tts_stage

    return tts_stage(spec, settings)


def _tiny(spec: StageSpec, settings: Settings) -> Scheduler:
    from omnivox.pipeline.models.tiny import tiny_llm_stage

    return tiny_llm_stage(spec, settings)


def _transformers(spec: StageSpec, settings: Settings) -> Scheduler:
    from omnivox.pipeline.models.tiny import transformers_llm_stage

    return transformers_llm_stage(spec, settings)


def _tiny_encoder(kind: str) -> Factory:
    def build(spec: StageSpec, settings: Settings) -> Scheduler:
        from omnivox.pipeline.models.tiny import tiny_encoder_stage

        return tiny_encoder_stage(spec, kind)

    return build


# model name -> (the scheduler kinds it runs on, its factory)
MODELS: dict[str, tuple[tuple[str, ...], Factory]] = {
    "whisper": (("streaming",), _whisper),
    "chat": (("parallel",), _chat),  # whichever LLM the voice settings choose
    "llamacpp": (("parallel",), _llamacpp),
    "openai": (("parallel",), _openai_llm),
    "hibari": (("streaming",), _hibari),
    "tiny": (("ar",), _tiny),
    "transformers": (("ar",), _transformers),
    "tiny_audio_encoder": (("simple",), _tiny_encoder("audio")),
    "tiny_image_encoder": (("simple",), _tiny_encoder("image")),
}


def build_scheduler(spec: StageSpec, settings: Settings) -> Scheduler:
    """Load the stage's model and put its scheduler in front of it."""
    if spec.model in BUILTIN_MODELS:
        scheduler = build_builtin(spec)
        assert scheduler is not None
        return scheduler
    try:
        kinds, factory = MODELS[spec.model]
    except KeyError:
        known = sorted([*MODELS, *BUILTIN_MODELS])
        raise ValueError(f"stage {spec.name}: unknown model {spec.model!r}; choose from {known}") from None
    if spec.scheduler not in kinds:
        raise ValueError(f"stage {spec.name}: model {spec.model} runs on a {' or '.join(kinds)} scheduler")
    return factory(spec, settings)
