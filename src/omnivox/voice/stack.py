"""The voice models one worker loads once and lends to each session in turn: VAD, ASR, TTS, LLM.

Models are built from the settings at worker start-up (in the worker's loading thread) and never per
session. A session ends with ``end_session``, which puts every stream-holding part (the VAD's
recurrent state, a decoder that was mid-utterance) back to a fresh state without reloading anything,
so whatever the last session did, even dying mid-word, the next one starts clean.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from omnivox.core.config import Settings
from omnivox.voice.asr.base import StreamingAsr
from omnivox.voice.llm.base import ChatLlm
from omnivox.voice.llm.history import ReplyTemperature
from omnivox.voice.tts.base import StreamingTts
from omnivox.voice.vad.base import VoiceActivityDetector

ASR_RATE = 16000  # what the VAD and both ASR backends hear


@dataclass
class VoiceStack:
    vad: VoiceActivityDetector
    asr: StreamingAsr
    tts: StreamingTts
    llm: ChatLlm
    system_prompt: str = ""
    temperature: ReplyTemperature = field(default_factory=ReplyTemperature)
    context_tokens: int = 8192
    max_reply_tokens: int = 512

    def end_session(self) -> None:
        """Forget the last session's audio streams; the models stay loaded."""
        self.vad.reset()
        self.asr.reset()

    def close(self) -> None:
        for part in (self.asr, self.tts, self.llm):
            close = getattr(part, "close", None)
            if close is not None:
                close()


def build_asr(settings: Settings) -> StreamingAsr:
    if settings.asr == "openai":
        from omnivox.voice.asr.openai_asr import OpenAIAsr

        if not settings.asr_url:
            raise ValueError("asr=openai needs asr_url (an OpenAI-compatible transcription server)")
        return OpenAIAsr(settings.asr_url, settings.asr_model, settings.asr_api_key, sample_rate=ASR_RATE)
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


def build_llm(settings: Settings) -> ChatLlm:
    """The remote or echo LLM (a local transformers LLM is built by the engines layer)."""
    kind = settings.llm
    if kind == "auto":
        kind = "openai" if settings.llm_url else "echo"
    if kind == "openai":
        from omnivox.voice.llm.openai_llm import OpenAIChatLlm

        return OpenAIChatLlm.from_settings(settings)
    if kind == "echo":
        from omnivox.voice.llm.echo_llm import EchoLlm

        return EchoLlm(delay_s=settings.echo_delay_s)
    raise ValueError(f"llm={kind!r} is a local model: the engine layer builds it")


def build_voice_stack(settings: Settings, llm: ChatLlm | None = None) -> VoiceStack:
    """Load every voice model the settings name (seconds of work: call it from a loading thread)."""
    from omnivox.voice.vad.silero import SileroVad

    return VoiceStack(
        vad=SileroVad(ASR_RATE),
        asr=build_asr(settings),
        tts=build_tts(settings),
        llm=llm if llm is not None else build_llm(settings),
        system_prompt=settings.system_prompt,
        temperature=ReplyTemperature(settings.llm_temperature_first, settings.llm_temperature_later),
        context_tokens=settings.llm_context_tokens,
        max_reply_tokens=settings.llm_max_tokens,
    )
