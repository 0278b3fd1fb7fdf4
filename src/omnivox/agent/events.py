"""What the voice agent says happened: typed events, in the order they happened, for an adapter to
word in its protocol (``worker.realtime`` as OpenAI Realtime events and items, ``worker.duplex`` as
units).

Times named ``audio_ms`` are in stream audio time: milliseconds of the user's audio since the
session's first sample. A user turn has an id from the adapter (``turn_id``: the realtime adapter's
item id), fixed when the user starts speaking.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

import numpy as np

from omnivox.agent.breakdown import StageTimes
from omnivox.agent.playout import Playback
from omnivox.core.errors import OmnivoxError
from omnivox.voice.llm.base import ToolCallDelta, Usage
from omnivox.voice.tool_calls import ToolResult, ToolRunning


@dataclass(frozen=True)
class SpeechStarted:
    turn_id: str
    audio_ms: float  # where the speech starts (with the turn detection's prefix padding)


@dataclass(frozen=True)
class SpeechStopped:
    turn_id: str
    audio_ms: float  # where the speech ended


@dataclass(frozen=True)
class TranscriptDelta:
    """More of the user's words, settled (the words two successive partial transcripts agree on)."""

    turn_id: str
    text: str  # appended to what was said before (with its leading space)


@dataclass(frozen=True)
class InputCleared:
    """The user's audio since the last turn makes no turn (noise, or the adapter's ``clear``)."""


JudgedAction = Literal["cut", "resume", "wait"]


@dataclass(frozen=True)
class SpeechJudged:
    """Speech over the reply was judged: ``verdict`` (``agent.interruption.Verdict``) and what it did
    (``action``: ``cut`` the reply, ``resume`` it, or ``wait``: an early partial's words, the reply
    still paused, its settled words to decide), the words it was judged on and the rest of the
    evidence (recorded in the timeline: every decision with its reason)."""

    verdict: str
    action: JudgedAction
    text: str
    evidence: dict[str, float]


HearingEvent = SpeechStarted | SpeechStopped | TranscriptDelta | InputCleared | SpeechJudged


@dataclass(frozen=True)
class UserTurn:
    """The user's turn is over: what they said (a reply to it, if one is due, follows)."""

    turn_id: str
    text: str  # the final transcript ("" only for a turn the adapter committed by hand)


@dataclass(frozen=True)
class IdleTimeout:
    """The user said nothing for the idle timeout after the last reply played: the agent prompts them."""

    audio_start_ms: float
    audio_end_ms: float


@dataclass(frozen=True)
class Failure:
    """Something failed and the agent goes on: the hearing (a lost ASR stage: the next turn is heard
    again), or an adapter's command (``tag``: the adapter's name for it, e.g. a client event id)."""

    error: OmnivoxError
    tag: str | None = None


# ---- replies (``agent.reply``): each names its reply by the id of its plan


class ReplyState(StrEnum):
    """Where a reply is in its life (``agent.reply`` holds the table of its moves)."""

    HELD = "held"  # prepared during the user's pause; nothing said yet
    SPEAKING = "speaking"  # its words and audio are going out
    PAUSED = "paused"  # speech over it: no audio goes out until it resumes or is cancelled
    DONE = "done"  # said to the end
    CANCELLED = "cancelled"  # cut short (barge-in, the adapter)
    FAILED = "failed"  # the models failed
    DISCARDED = "discarded"  # a held reply dropped unheard (it said nothing at all)


@dataclass
class ReplyFigures:
    """What a reply reports of itself (seconds)."""

    reason: str | None = None  # why it was cancelled (turn_detected, client_cancelled)
    error: OmnivoxError | None = None  # why it failed (or why its apology was said instead)
    llm_ttft_s: float | None = None
    tts_ttfa_s: float | None = None
    voice_to_voice_s: float | None = None  # from the end of the user's speech to its first audio
    tts_busy_s: float = 0.0  # synthesis time (output thread) and the audio it made
    tts_audio_s: float = 0.0
    usage: Usage | None = None  # the LLM's own token counts, where it reported them
    # when it passed each stage, and the turn it answers (complete by its ``ReplyReport``): the
    # per-turn breakdown (``times.marks()``)
    times: StageTimes = field(default_factory=StageTimes)


@dataclass(frozen=True)
class ReplyStarted:
    """The reply begins to be said (at once, or when a held one is released)."""

    reply_id: str
    playback: Playback  # the ledger's record of its audio: what was sent, played and heard


@dataclass(frozen=True)
class ReplyText:
    """A word the LLM wrote, with the whitespace before it (their concatenation is the reply)."""

    reply_id: str
    text: str


@dataclass(frozen=True)
class ReplySentence:
    """A spoken sentence begins: its audio follows (``ReplyAudio``)."""

    reply_id: str
    text: str  # the sentence as it is spoken (cleaned of markdown and the like)
    index: int  # its place in the reply (0: the first)


@dataclass(frozen=True)
class ReplyAudio:
    """One frame of the reply's audio goes out now (paced: never far ahead of real time)."""

    reply_id: str
    audio: np.ndarray  # float32 mono at 24 kHz
    ms: float


@dataclass(frozen=True)
class ReplyCall:
    """A piece of a function call the LLM makes (the first names the call and the function)."""

    reply_id: str
    call: ToolCallDelta


@dataclass(frozen=True)
class ReplyTool:
    """A tool the server runs itself (``voice.tool_calls``) started, or ended with its result."""

    reply_id: str
    step: ToolRunning | ToolResult


@dataclass(frozen=True)
class ReplyPaused:
    """Speech over the reply: its audio stopped at ``at_ms`` (undoably)."""

    reply_id: str
    at_ms: float


@dataclass(frozen=True)
class ReplyResumed:
    """The speech was not an interruption: the audio plays on from ``at_ms``."""

    reply_id: str
    at_ms: float
    reason: str  # no_words | backchannel | echo


@dataclass(frozen=True)
class ReplyEnded:
    """The reply is over (done, cancelled, failed, or a held one discarded unheard)."""

    reply_id: str
    state: ReplyState
    figures: ReplyFigures  # its latencies, why it was cut or failed, the LLM's token counts
    written: str  # every word the LLM wrote
    heard: str  # what the user heard of it: what it said, cut where its audio stopped
    stopped_ms: float | None = None  # a cut spoken reply: where its audio stopped (what was heard)


@dataclass(frozen=True)
class ReplyCut:
    """A finished reply's audio, still playing at the listener, was cut at ``stopped_ms`` (a barge-in,
    or the adapter's): it keeps what was heard."""

    reply_id: str
    stopped_ms: float


@dataclass(frozen=True)
class ReplyReport:
    """A reply the user heard is over and its thread has ended: its figures, and the hearing's work
    since the last report (busy seconds, audio seconds: the real-time factor's)."""

    reply_id: str
    state: ReplyState
    figures: ReplyFigures
    asr_busy_s: float
    asr_audio_s: float


ReplyEvent = (
    ReplyStarted
    | ReplyText
    | ReplySentence
    | ReplyAudio
    | ReplyCall
    | ReplyTool
    | ReplyPaused
    | ReplyResumed
    | ReplyEnded
    | ReplyCut
)

AgentEvent = HearingEvent | UserTurn | IdleTimeout | Failure | ReplyEvent | ReplyReport
