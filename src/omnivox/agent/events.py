"""What the voice agent says happened: typed events, in the order they happened, for an adapter to
word in its protocol (``worker.realtime`` as OpenAI Realtime events and items, ``worker.duplex`` as
units).

Times named ``audio_ms`` are in stream audio time: milliseconds of the user's audio since the
session's first sample. A user turn has an id from the adapter (``turn_id``: the realtime adapter's
item id), fixed when the user starts speaking.
"""

from __future__ import annotations

from dataclasses import dataclass


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


HearingEvent = SpeechStarted | SpeechStopped | TranscriptDelta | InputCleared
