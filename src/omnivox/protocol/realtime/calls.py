"""What every call that carries a realtime session shares, WebRTC (``media``) and phone calls
(``phone``) alike: the call fixes the session's audio formats (a client's ``session.update``
cannot change them), caller audio is ``input_audio_buffer.append``, reply audio comes as
``response.output_audio.delta`` (or its beta name), and playback is reported as on WebRTC
(``output_audio_buffer.started/stopped/cleared``), to the client and (``playback_report``) to the
session, which counts a reply as playing by these reports."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any

from omnivox.protocol.realtime import events as ev

AUDIO_DELTAS = frozenset({"response.output_audio.delta", "response.audio.delta"})
_FORMAT_FIELDS = ("input_audio_format", "output_audio_format")
_SESSION_UPDATES = ("session.update", "transcription_session.update")
_PLAYBACK = {
    "started": ev.OutputAudioStarted,
    "stopped": ev.OutputAudioStopped,
    "cleared": ev.OutputAudioCleared,
}


def fixed_formats(session: dict[str, Any], audio_format: dict[str, Any]) -> dict[str, Any]:
    """``session`` with both audio formats set to ``audio_format`` (what the call carries); the
    beta's flat format fields are dropped."""
    out = {k: v for k, v in session.items() if k not in _FORMAT_FIELDS}
    audio = dict(out.get("audio") or {})
    for side in ("input", "output"):
        part = dict(audio.get(side) or {})
        part["format"] = dict(audio_format)
        audio[side] = part
    out["audio"] = audio
    return out


def with_fixed_formats(
    frame: str,
    audio_format: dict[str, Any],
    fixed: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> str:
    """A client's frame with any session update's formats fixed, and whatever else the call fixes
    (``fixed``: the phone's line); anything else as it is: a frame that is not JSON, or nested past
    what the parser takes, goes on too, and the worker says what is wrong with it."""
    try:
        event = json.loads(frame)
    except (ValueError, RecursionError):
        return frame
    if (
        isinstance(event, dict)
        and event.get("type") in _SESSION_UPDATES
        and isinstance(event.get("session"), dict)
    ):
        session = fixed_formats(event["session"], audio_format)
        event["session"] = fixed(session) if fixed is not None else session
        return json.dumps(event)
    return frame


def append(audio: bytes) -> str:
    """The client frame that carries ``audio`` (in the session's input format) from the caller."""
    return json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(audio).decode()})


def delta_audio(event: dict[str, Any]) -> bytes:
    """The audio of a ``response.output_audio.delta`` (nothing when it is not base64)."""
    try:
        return base64.b64decode(event.get("delta") or "", validate=True)
    except (binascii.Error, ValueError):
        return b""


def playback_report(kind: str, response_id: str) -> str | None:
    """The client frame telling the session its caller's player has ``queued``, ``started`` or
    ``stopped`` the audio of ``response_id`` (``omnivox.output_audio_buffer.report``; None for
    ``cleared``: the session cut that audio itself, or was told to)."""
    if kind not in ("queued", "started", "stopped"):
        return None
    report = {"type": "omnivox.output_audio_buffer.report", "response_id": response_id, "state": kind}
    return json.dumps(report)


def playback(kind: str, response_id: str) -> str:
    """``output_audio_buffer.started``, ``.stopped`` or ``.cleared`` for ``response_id``."""
    return _PLAYBACK[kind](response_id=response_id).model_dump_json()
