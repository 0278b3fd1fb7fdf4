"""The voice models one worker loads once and lends to each session in turn: VAD, ASR, TTS, LLM, and
the end-of-turn model behind ``semantic_vad``. A ``VoiceStack`` is the in-process cascade's
``VoiceModels`` (``voice.models``): its listener and replies run on these very models.

Models are built from the settings at worker start-up (in the worker's loading thread) and never per
session. A session ends with ``end_session``, which puts every stream-holding part (the VAD's
recurrent state, a decoder that was mid-utterance) back to a fresh state without reloading anything,
so whatever the last session did, even dying mid-word, the next one starts clean.

The embedded models ship inside pip packages (``voice.packaged``); ``missing_models`` says, before
anything loads, which of the packages the settings need are not installed, so a server refuses to
start with the pip command to run rather than failing in a worker, and never falls back to another
model.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from omnivox.core.config import Settings
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.asr.base import StreamingAsr
from omnivox.voice.listener import Listener
from omnivox.voice.llm.base import ChatLlm
from omnivox.voice.llm.history import ReplyTemperature
from omnivox.voice.models import VoiceProfile
from omnivox.voice.packaged import (
    SMART_TURN_V3_ONNX,
    SMOLLM2_135M_GGUF,
    WHISPER_TINY_EN_CT2,
    MissingModelPackage,
    PackagedModel,
)
from omnivox.voice.reply import ReplyPiece, ReplyRequest, produce_reply, with_apology
from omnivox.voice.tts.base import StreamingTts
from omnivox.voice.turn.base import EndOfTurnModel
from omnivox.voice.vad.base import VoiceActivityDetector
from omnivox.voice.vad.turn import TurnParams

ASR_RATE = 16000  # what the VAD and the ASR backends hear

# Reply budgets: a remote model gets the generous defaults; the embedded 135M model rambles and
# invents (short replies are its best), and its KV state is the worker's memory (2048 tokens of
# history: about 50 MB of keys and values; the context holds half as much again, because the history
# is trimmed on approximate token counts).
REMOTE_CONTEXT_TOKENS, REMOTE_MAX_TOKENS = 8192, 512
LOCAL_CONTEXT_TOKENS, LOCAL_MAX_TOKENS = 2048, 80
# SmolLM2-135M at temperature 0-0.3 repeats itself within a few sentences ("la bonne bébé, la bonne
# bébé, ..."); a mild repetition penalty stops that without changing short answers.
LOCAL_REQUEST_OPTIONS = {"repeat_penalty": 1.1}


@dataclass
class VoiceStack:
    vad: VoiceActivityDetector
    asr: StreamingAsr
    tts: StreamingTts
    llm: ChatLlm
    turn: EndOfTurnModel | None = None  # scores pauses for semantic_vad (None: server_vad only)
    system_prompt: str = ""
    temperature: ReplyTemperature = field(default_factory=ReplyTemperature)
    context_tokens: int = REMOTE_CONTEXT_TOKENS
    max_reply_tokens: int = REMOTE_MAX_TOKENS

    # ---- VoiceModels

    def profile(self) -> VoiceProfile:
        return VoiceProfile(
            system_prompt=self.system_prompt,
            voices=tuple(self.tts.voices),
            default_voice=self.tts.default_voice,
            context_tokens=self.context_tokens,
            max_reply_tokens=self.max_reply_tokens,
            temperature=self.temperature,
            tool_calls=self.llm.tool_calls,
            vision=self.llm.vision,
            llm_name=self.llm.name,
            asr_name=type(self.asr).__name__,
        )

    def open_listener(
        self, params: TurnParams | None, confirm_ms: float, speculate_at: float | None = 0.3
    ) -> Listener:
        return Listener(self.vad, self.asr, params, confirm_ms, speculate_at, end_of_turn=self.turn)

    def reply(self, request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        return with_apology(produce_reply(self.llm, self.tts, request, stop), self.tts, request, stop)

    def prefill(self, request: ReplyRequest) -> None:
        self.llm.prefill_turn(request.messages, request.llm)

    # ---- the session's end, the worker's

    def end_session(self) -> None:
        """Forget the last session's audio streams; the models stay loaded."""
        self.vad.reset()
        self.asr.reset()

    def close(self) -> None:
        for part in (self.asr, self.tts, self.llm):
            close = getattr(part, "close", None)
            if close is not None:
                close()


def llm_kind(settings: Settings) -> str:
    """The LLM the settings choose, ``auto`` resolved: openai with an ``llm_url``, else local."""
    if settings.llm == "auto":
        return "openai" if settings.llm_url else "local"
    return settings.llm


def required_models(settings: Settings) -> list[PackagedModel]:
    """The packaged models a cascade with these settings loads."""
    needed = [SMART_TURN_V3_ONNX]
    if settings.asr == "whisper":
        needed.append(WHISPER_TINY_EN_CT2)
    if llm_kind(settings) == "local":
        needed.append(SMOLLM2_135M_GGUF)
    return needed


def missing_models(settings: Settings) -> list[MissingModelPackage]:
    """What ``required_models`` lacks on this machine (cheap: package metadata, nothing loads)."""
    missing = []
    for model in required_models(settings):
        try:
            model.path()
        except MissingModelPackage as err:
            missing.append(err)
    return missing


def build_asr(settings: Settings) -> StreamingAsr:
    if settings.asr == "openai":
        from omnivox.voice.asr.openai_asr import OpenAIAsr

        if not settings.asr_url:
            raise ValueError("asr=openai needs asr_url (an OpenAI-compatible transcription server)")
        return OpenAIAsr(settings.asr_url, settings.asr_model, settings.asr_api_key, sample_rate=ASR_RATE)
    if settings.asr == "whisper":
        from omnivox.voice.asr.whisper_asr import WhisperAsr

        return WhisperAsr(
            sample_rate=ASR_RATE,
            threads=settings.asr_threads,
            partial_interval_ms=settings.asr_partial_ms or None,
        )
    from omnivox.voice.asr.pocketsphinx_asr import PocketsphinxAsr

    return PocketsphinxAsr(sample_rate=ASR_RATE)


def build_tts(settings: Settings) -> StreamingTts:
    if settings.tts == "openai":
        from omnivox.voice.tts.openai_tts import OpenAITts

        if not settings.tts_url:
            raise ValueError("tts=openai needs tts_url (an OpenAI-compatible speech server)")
        return OpenAITts(
            settings.tts_url, settings.tts_model, settings.voice or "alloy", settings.tts_api_key
        )
    from omnivox.voice.tts.hibari import HibariTts

    if settings.voice:
        return HibariTts(voice=settings.voice, threads=settings.tts_threads)
    return HibariTts(threads=settings.tts_threads)


def context_tokens(settings: Settings) -> int:
    """The history budget: ``llm_context_tokens``, or the default for the LLM chosen."""
    if settings.llm_context_tokens is not None:
        return settings.llm_context_tokens
    return LOCAL_CONTEXT_TOKENS if llm_kind(settings) == "local" else REMOTE_CONTEXT_TOKENS


def max_reply_tokens(settings: Settings) -> int:
    if settings.llm_max_tokens is not None:
        return settings.llm_max_tokens
    return LOCAL_MAX_TOKENS if llm_kind(settings) == "local" else REMOTE_MAX_TOKENS


def build_llm(settings: Settings) -> ChatLlm:
    """The local, remote or echo LLM (a local transformers LLM is built by the engines layer)."""
    kind = llm_kind(settings)
    if kind == "local":
        from omnivox.voice.llm.llamacpp_llm import LlamaCppLlm

        budget = context_tokens(settings)
        return LlamaCppLlm(
            threads=settings.llm_threads,
            context_tokens=budget + budget // 2,
            max_tokens=max_reply_tokens(settings),
            max_sentences=settings.llm_max_sentences or None,
            # a voice reply does not need to be bit-identical to a full recompute: prompts go
            # through in batches, faster than one token per pass (docs/benchmarks.md)
            exact=False,
            request_options=LOCAL_REQUEST_OPTIONS,
        )
    if kind == "openai":
        from omnivox.voice.llm.openai_llm import OpenAIChatLlm

        return OpenAIChatLlm.from_settings(settings)
    if kind == "echo":
        from omnivox.voice.llm.echo_llm import EchoLlm

        return EchoLlm(delay_s=settings.echo_delay_s)
    raise ValueError(f"llm={kind!r} is a local model: the engine layer builds it")


def build_voice_stack(settings: Settings, llm: ChatLlm | None = None) -> VoiceStack:
    """Load every voice model the settings name (seconds of work: call it from a loading thread).

    Raises ``MissingModelPackage`` (naming the pip command) if a packaged model is not installed."""
    from omnivox.voice.turn.smart_turn import SmartTurn
    from omnivox.voice.vad.silero import SileroVad

    stack = VoiceStack(
        vad=SileroVad(ASR_RATE),
        asr=build_asr(settings),
        tts=build_tts(settings),
        llm=llm if llm is not None else build_llm(settings),
        turn=SmartTurn(),
        system_prompt=settings.system_prompt,
        temperature=ReplyTemperature(settings.llm_temperature_first, settings.llm_temperature_later),
        context_tokens=context_tokens(settings),
        max_reply_tokens=max_reply_tokens(settings),
    )
    if stack.system_prompt:
        # a local model computes the default instructions now, so the first reply of every session
        # that keeps them computes only its own words
        stack.llm.warm([ChatMessage(role="system", content=stack.system_prompt)])
    return stack
