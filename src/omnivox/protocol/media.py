"""What a wire protocol tells the gateway to carry a session over WebRTC instead of a WebSocket.

A WebRTC call moves the session's audio onto RTP tracks (Opus, both ways) and its JSON events onto
a data channel; the worker still serves the same WebSocket session. The gateway bridges the two
without naming the protocol: the protocol's ``MediaBridge`` says how microphone audio becomes a
client frame, what each worker frame is for the call (audio for the track, an event for the data
channel, a cue that the audio the call still holds must go) and how the call says that playback
started, stopped or was cleared.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Route:
    """Where one worker frame goes on a call."""

    event: str | None = None  # for the data channel (and sideband listeners), as it is
    audio: bytes = b""  # PCM16 mono at ``output_rate`` for the outgoing track
    response_id: str | None = None  # whose audio, or whose audio to clear
    clear: bool = False  # drop the audio the call holds, unplayed
    cleared_event: bool = False  # ``event`` itself says the audio was cleared (the call adds nothing)
    audio_over: bool = False  # this response sends no more audio (the track says "stopped" once played)
    pause: bool = False  # hold playback where it is: speech over the reply, not judged yet
    resume: bool = False  # play on from where it was held


class MediaBridge(ABC):
    channel_label: str  # the data channel the events travel on
    input_rate: int  # microphone audio into the session: PCM16 mono at this rate
    output_rate: int  # the session's audio out: PCM16 mono at this rate

    @abstractmethod
    def preamble(self, session: dict[str, Any] | None) -> list[str]:
        """Client frames that set the session up for the call (audio formats, the caller's
        ``session`` defaults), sent before anything the client sends."""

    @abstractmethod
    def audio_in(self, pcm16: bytes) -> str:
        """The client frame that carries ``pcm16`` microphone audio."""

    @abstractmethod
    def client_frame(self, frame: str) -> str | None:
        """A frame the client sent on the data channel, as the worker should get it (None: dropped)."""

    @abstractmethod
    def route(self, frame: str) -> Route:
        """What one worker frame is for the call."""

    @abstractmethod
    def playback(self, kind: str, response_id: str) -> str:
        """The event saying the audio of ``response_id`` ``started``, ``stopped`` or was ``cleared``."""

    @abstractmethod
    def playback_report(self, kind: str, response_id: str) -> str | None:
        """The client frame telling the session that the call's track ``started`` or
        ``stopped`` playing the audio of ``response_id`` (None: the session takes no such reports)."""
