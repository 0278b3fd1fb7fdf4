"""What a wire protocol tells the gateway to carry a session over a phone call (SIP and RTP, or a
carrier's media stream) instead of a WebSocket.

The call's audio is G.711 at 8 kHz both ways, and the session takes and speaks it as it is (no
transcoding in the gateway). The gateway plays the session's audio to the caller and knows what was
actually heard (its own RTP pacing, or the carrier's playback markers); the protocol's
``PhoneBridge`` says how caller audio and key presses become client frames, what each session
frame is for the call (audio, a pause, a cut, a truncation, a hang-up) and how the call words its
playback reports, and how it tells the session what the caller really heard.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from omnivox.core.errors import OmnivoxError


@dataclass(frozen=True)
class PhoneRoute:
    """What one session frame is for a phone call."""

    event: str | None = None  # for sideband listeners, as it is
    audio: bytes = b""  # G.711 in the call's encoding
    response_id: str | None = None  # whose audio (or whose audio to clear)
    audio_over: bool = False  # this response sends no more audio
    clear: bool = False  # drop the audio not played yet (a cancelled reply)
    cleared_event: bool = False  # ``event`` itself says the audio was cleared
    pause: bool = False  # hold playback: speech over the reply, not judged yet
    resume: bool = False  # play on from where it was held
    item: tuple[str, str] | None = None  # (response id, item id): an assistant item opened
    truncated: tuple[str, int] | None = None  # (item id, audio_end_ms): the session cut an item
    hang_up: bool = False  # the session asked to end the call (the end_call tool)
    keys: tuple[str, str] | None = None  # (tool call id, digits): the session asked to press keys
    caller_spoke: bool = False  # the caller started talking (the idle timer starts again)


class PhoneBridge(ABC):
    @abstractmethod
    def preamble(
        self, session: dict[str, Any] | None, encoding: str, end_call: bool, send_dtmf: bool = False
    ) -> list[str]:
        """Client frames that set the session up for a call in ``encoding`` (audio/pcmu or
        audio/pcma), with ``session`` (the protocol's session object) and, with ``end_call``, the
        built-in tool that lets the model hang up (with ``send_dtmf``, the one that presses keys)."""

    @abstractmethod
    def profile_session(
        self,
        instructions: str | None,
        voice: str | None,
        tools: list[dict[str, Any]],
        turn_detection: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """The protocol's session object for an agent profile."""

    @abstractmethod
    def audio_in(self, payload: bytes) -> str:
        """The client frame carrying ``payload`` (G.711) from the caller."""

    @abstractmethod
    def client_frame(self, frame: str, encoding: str) -> str | None:
        """A sideband's frame as the session should get it (the call's audio formats kept)."""

    @abstractmethod
    def route(self, frame: str) -> PhoneRoute:
        """What one session frame is for the call."""

    @abstractmethod
    def playback(self, kind: str, response_id: str) -> str:
        """The event saying the audio of ``response_id`` ``started``, ``stopped`` or was ``cleared``."""

    @abstractmethod
    def playback_report(self, kind: str, response_id: str) -> str | None:
        """The client frame telling the session that the call's playout (the carrier's marks, or
        the paced sender) ``started`` or ``stopped`` playing the audio of ``response_id`` (None:
        the session takes no such reports)."""

    @abstractmethod
    def heard(self, item_id: str, audio_end_ms: int) -> str:
        """The client frame saying the caller heard ``audio_end_ms`` of an assistant item."""

    @abstractmethod
    def dtmf(self, digit: str) -> tuple[list[str], str]:
        """A key press: client frames for the session, and the event for sidebands."""

    @abstractmethod
    def tool_output(self, call_id: str, output: dict[str, Any]) -> str:
        """The client frame giving a built-in tool's result back to the session."""

    @abstractmethod
    def greeting(self, instructions: str) -> str:
        """The client frame that makes the session speak first."""

    @abstractmethod
    def failure(self, err: OmnivoxError) -> str:
        """The event telling sidebands the call failed before it connected (a dial that was
        busy, not answered, refused)."""
