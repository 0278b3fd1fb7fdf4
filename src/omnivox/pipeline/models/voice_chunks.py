"""What the voice stages (ASR, LLM, TTS) and their client (``engines.pipeline_voice``) send each other:
typed msgspec structs, in ``voice.reply``'s shapes.

The pipeline core carries a request's values as a dict (plain values as MessagePack, arrays beside
them in shared memory or ZeroMQ frames: ``pipeline.relay``) and never looks inside. Each struct here
becomes such a dict with ``to_values`` (its tag under ``"type"``) and is checked back into a struct by
the decoder of its direction (``asr_input``, ``reply_output``, ...), so a value of the wrong kind or
shape is a ``BadPipelineMessage`` for that request, not a ``KeyError`` deep in a model.

The reply travels as ``voice.reply.produce_reply`` makes it in one process, cut between stages: the
LLM stage runs its LLM half (``FirstTokenChunk``, then ``WordChunk`` s, the shapes of ``FirstToken``
and ``Word``), the TTS stage cuts the words into sentences and speaks them (``SpokenChunk``, the shape
of ``Spoken``), and ``pipeline_reply`` turns the chunks back into ``ReplyPiece`` s.

Who sends what:

- client -> ASR: ``TranscribeStream`` (a session's hearing: holds a slot) then ``UtteranceAudio``,
  ``UtteranceEnd``, ``UtteranceDrop`` chunks; or ``TranscribeClip`` (one-shot, no slot).
- ASR -> client: ``PartialTranscript`` and ``FinalTranscript`` chunks; the result is
  ``StreamTranscribed`` (a stream) or ``ClipTranscript`` (a clip).
- client -> LLM: ``ReplyPrompt``. LLM -> TTS and client: ``FirstTokenChunk``, then before the first
  word ``VoiceChunk`` (how the TTS speaks this reply), then ``WordChunk`` s; the result is
  ``ReplyWritten``. A ``ReplyPrompt`` with ``prefill`` set (``VoiceModels.prefill`` while the user
  speaks) sends nothing back but an empty ``ReplyWritten``: the conversation's KV slot now holds it.
- client -> TTS: ``SpeakText`` (one-shot). TTS -> client: ``SpokenChunk`` s; the result is
  ``ReplySpoken``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import numpy as np

from omnivox.core.errors import BadPipelineMessage
from omnivox.voice.reply import Spoken, Word

# ---- ASR


class TranscribeStream(msgspec.Struct, tag="transcribe_stream", frozen=True):
    """A session's hearing: one request holding an ASR slot for the session's life."""


class TranscribeClip(msgspec.Struct, tag="transcribe_clip", frozen=True):
    audio: np.ndarray  # float32 mono at the ASR's rate (16 kHz)


class UtteranceAudio(msgspec.Struct, tag="utterance_audio", frozen=True):
    audio: np.ndarray  # more of the current utterance, float32 at 16 kHz


class UtteranceEnd(msgspec.Struct, tag="utterance_end", frozen=True):
    utterance: int  # this utterance ended: its final transcript comes back


class UtteranceDrop(msgspec.Struct, tag="utterance_drop", frozen=True):
    """Forget the utterance in progress."""


class PartialTranscript(msgspec.Struct, tag="partial_transcript", frozen=True):
    utterance: int
    text: str


class FinalTranscript(msgspec.Struct, tag="final_transcript", frozen=True):
    utterance: int
    text: str


class ClipTranscript(msgspec.Struct, tag="clip_transcript", frozen=True):
    text: str


class StreamTranscribed(msgspec.Struct, tag="stream_transcribed", frozen=True):
    utterances: int  # final transcripts sent


AsrRequest = TranscribeStream | TranscribeClip
AsrInput = UtteranceAudio | UtteranceEnd | UtteranceDrop
AsrOutput = PartialTranscript | FinalTranscript | ClipTranscript | StreamTranscribed

# ---- the reply: LLM, then TTS


class ReplyPrompt(msgspec.Struct, tag="reply_prompt", frozen=True):
    messages: list[dict[str, Any]]  # ChatMessage dumps
    temperature: float | None = None
    max_tokens: int | None = None
    session: str | None = None  # the conversation: the LLM computes it in the KV slot holding it
    voice: str | None = None  # for the TTS (None: its default)
    speed: float | None = None
    prefill: bool = False  # only compute the prompt ahead in the conversation's slot: no reply


class FirstTokenChunk(msgspec.Struct, tag="first_token", frozen=True):
    after_s: float  # from the LLM stage's call to the LLM's first delta


class VoiceChunk(msgspec.Struct, tag="voice", frozen=True):
    voice: str | None = None  # None: unchanged
    speed: float | None = None


class WordChunk(msgspec.Struct, tag="word", frozen=True):
    text: str  # a whole word with the whitespace that preceded it (``voice.reply.Word``)


class ReplyWritten(msgspec.Struct, tag="reply_written", frozen=True):
    text: str
    words: int


class SpeakText(msgspec.Struct, tag="speak_text", frozen=True):
    text: str
    voice: str | None = None
    speed: float | None = None


class SpokenChunk(msgspec.Struct, tag="spoken", frozen=True):
    text: str  # the cleaned sentence this audio speaks (``voice.reply.Spoken``)
    audio: np.ndarray  # float32 mono at the TTS's rate
    synth_s: float
    starts_sentence: bool


class ReplySpoken(msgspec.Struct, tag="reply_spoken", frozen=True):
    sentences: int


LlmOutput = FirstTokenChunk | VoiceChunk | WordChunk
TtsRequest = SpeakText | ReplyWritten  # a one-shot text, or an LLM's result that streamed no words
ReplyOutput = FirstTokenChunk | VoiceChunk | WordChunk | SpokenChunk

# ---- to and from the pipeline's values


def to_values(message: msgspec.Struct) -> dict[str, Any]:
    """``message`` as pipeline values: its fields, and its tag under ``"type"``."""
    return {"type": message.__struct_config__.tag, **msgspec.structs.asdict(message)}


def _convert(values: Mapping[str, Any], kind: Any, what: str) -> Any:
    try:
        return msgspec.convert(values, kind)
    except msgspec.ValidationError as exc:
        raise BadPipelineMessage(f"not {what}: {exc}") from None


def asr_request(values: Mapping[str, Any]) -> AsrRequest:
    """A request to the ASR stage; values without a type (a stream opened by its first chunk)
    are a stream."""
    if "type" not in values:
        return TranscribeStream()
    result: AsrRequest = _convert(values, AsrRequest, "an ASR request")
    return result


def asr_input(values: Mapping[str, Any]) -> AsrInput:
    result: AsrInput = _convert(values, AsrInput, "an ASR stream chunk")
    return result


def asr_output(values: Mapping[str, Any]) -> AsrOutput:
    result: AsrOutput = _convert(values, AsrOutput, "what the ASR stage sends")
    return result


def reply_prompt(values: Mapping[str, Any]) -> ReplyPrompt:
    result: ReplyPrompt = _convert(values, ReplyPrompt, "a reply prompt")
    return result


def tts_request(values: Mapping[str, Any]) -> TtsRequest | None:
    """What the TTS stage is opened with; None for a stream opened by its first chunk."""
    if "type" not in values:
        return None
    result: TtsRequest = _convert(values, TtsRequest, "a TTS request")
    return result


def llm_output(values: Mapping[str, Any]) -> LlmOutput:
    result: LlmOutput = _convert(values, LlmOutput, "what the LLM stage streams")
    return result


def reply_output(values: Mapping[str, Any]) -> ReplyOutput:
    result: ReplyOutput = _convert(values, ReplyOutput, "a reply chunk")
    return result


# ---- voice.reply's pieces


def spoken_chunk(piece: Spoken) -> SpokenChunk:
    return SpokenChunk(piece.text, piece.audio, piece.synth_s, piece.starts_sentence)


def reply_piece(chunk: WordChunk | SpokenChunk) -> Word | Spoken:
    """The ``voice.reply`` piece a chunk carries."""
    if isinstance(chunk, WordChunk):
        return Word(chunk.text)
    return Spoken(chunk.text, np.asarray(chunk.audio, np.float32), chunk.synth_s, chunk.starts_sentence)
