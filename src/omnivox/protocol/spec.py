"""How a wire protocol is described once, so the gateway and workers can serve it without naming it.

A protocol says where it lives (``path`` on the gateway, ``worker_path`` on a worker), what it asks
of the pool (its task type), how it parses client frames, how it words errors and queue notices,
and how long a session holds a worker (``scope``):

- ``session``: the client's whole connection holds one worker (realtime, duplex). The gateway admits
  it once, then relays frames both ways without parsing them; the worker parses and answers.
- ``turn``: each turn takes a worker afresh, routed by the history it continues (turn-based
  streaming). Between turns the gateway parses the client's messages to see a turn begin; during a
  turn it relays; the worker ends the turn with an internal ``turn_end`` frame.

The gateway mounts every protocol in ``protocol.registry``; a worker mounts those it has a handler
for. Adding a protocol is a module here plus a worker handler.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal
from urllib.parse import quote, urlencode

from pydantic import TypeAdapter

from omnivox.core.config import Settings
from omnivox.core.errors import OmnivoxError
from omnivox.protocol.control.queue import QueueNotice
from omnivox.protocol.media import MediaBridge
from omnivox.protocol.phone import PhoneBridge
from omnivox.protocol.timelines.reader import TimelineReader
from omnivox.protocol.wire import known_types, parse

# which of the server's frames a client is not sent (``WireProtocol.withheld``)
Withheld = Callable[[str | bytes], bool]

Scope = Literal["session", "turn"]


@dataclass(frozen=True)
class Parser:
    """A discriminated union of client messages, with the other names its types may come under."""

    adapter: TypeAdapter[Any]
    aliases: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        _ = self.tags  # an adapter that is no discriminated union is refused here, not at a frame

    @cached_property
    def tags(self) -> frozenset[str]:
        """The ``type`` tags the union accepts."""
        return known_types(self.adapter)

    def __call__(self, raw: str | bytes, max_bytes: int) -> Any:
        return parse(self.adapter, raw, max_bytes=max_bytes, tags=self.tags, aliases=self.aliases)


@dataclass(frozen=True)
class TurnRoute:
    """What the gateway needs to route a turn: the hash of the history the turn continues."""

    history_hash: str | None


class WireProtocol(ABC):
    name: str  # also the worker handler's name
    path: str  # the gateway's WebSocket route
    worker_paths: tuple[str, ...]  # a worker's routes; the last one takes the session id
    scope: Scope
    parser: Parser

    # ---- sessions

    def session_id(self, path_params: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        """The client's name for its session (None: the gateway makes one up)."""
        return path_params.get("session_id")

    @abstractmethod
    def task_type(self, session_id: str, query: Mapping[str, str]) -> str:
        """The pool's task type for this session."""

    def subprotocol(self, offered: list[str]) -> str | None:
        """The WebSocket subprotocol to accept (browsers fail a handshake that answers none of theirs,
        and send their key as one: ``openai-insecure-api-key.<key>``)."""
        return offered[0] if offered else None

    def worker_url(self, base: str, session_id: str, params: Mapping[str, str]) -> str:
        """The worker's WebSocket URL for ``session_id`` (escaped: ids are the client's choice)."""
        root = base.rstrip("/")
        scheme = "wss://" if root.startswith("https://") else "ws://"
        root = scheme + root.split("://", 1)[-1]
        path = self.worker_paths[-1].replace("{session_id}", quote(session_id, safe=""))
        return root + path + (f"?{urlencode(params)}" if params else "")

    def worker_params(self, headers: Mapping[str, str], query: Mapping[str, str]) -> dict[str, str]:
        """What the worker must know of the client's request (e.g. which event names it speaks)."""
        return {}

    def max_wait_s(self, settings: Settings) -> float | None:
        """How long a session may wait in the queue (None: as long as it stays connected)."""
        return None

    def held_bytes(self, settings: Settings) -> int:
        """Client frames held while a session-scoped session waits for its worker."""
        return 0

    # ---- wording

    @abstractmethod
    def error_frame(self, err: OmnivoxError, event_id: str | None = None) -> str:
        """The protocol's error message for ``err`` (caused by the client message ``event_id``)."""

    @abstractmethod
    def notice_frame(self, notice: QueueNotice) -> str | None:
        """The protocol's words for a queue notice (None: the client hears nothing of it)."""

    def error_code(self, err: OmnivoxError) -> str:
        """The code ``err`` goes under on this protocol's wire (and in the error metrics)."""
        return err.code

    def refusal(self, err: OmnivoxError) -> OmnivoxError:
        """How a failed admission (full queue, cancelled ticket, wait ran out) is said."""
        return err

    def withheld(self, query: Mapping[str, str]) -> Withheld | None:
        """Which of the server's frames this client is not sent (seen by recording all the same),
        e.g. extension events it did not ask for (None: it gets them all)."""
        return None

    # ---- recording

    def timeline_reader(self) -> TimelineReader | None:
        """A fresh reader of one session's frames as timeline events, for recording (None: sessions
        of this protocol are not recorded)."""
        return None

    # ---- turn scope

    def turn_start(self, msg: Any) -> TurnRoute | None:
        """A turn-scoped protocol: the routing of the turn ``msg`` opens (None: it opens none)."""
        return None

    def ends_session(self, msg: Any) -> bool:
        """Whether ``msg`` asks to end the session."""
        return False

    def between_turns(self, msg: Any) -> OmnivoxError | None:
        """The answer to a message that needs a turn in progress, when none is."""
        return None

    # ---- ephemeral keys and WebRTC calls (protocols that serve them)

    client_secrets: bool = False  # POST {path}/client_secrets mints one-session keys
    media: MediaBridge | None = None  # POST {path}/calls carries sessions over WebRTC
    phone: PhoneBridge | None = None  # phone calls (SIP, carrier media streams) carry its sessions

    def session_defaults(self, session: dict[str, Any]) -> dict[str, Any]:
        """Check the session defaults a key is minted with (raises ``InvalidMessage`` naming the
        field); returns the session they describe, as the protocol reports sessions."""
        raise NotImplementedError

    def defaults_frames(self, session: dict[str, Any]) -> list[str]:
        """Client frames that apply ``session`` defaults at the start of a session."""
        return []

    def call_id(self, query: Mapping[str, str]) -> str | None:
        """The WebRTC call a WebSocket asks to attach to as a sideband (None: its own session)."""
        return None
