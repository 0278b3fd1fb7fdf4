"""The OpenAI Realtime API over WebRTC (``POST /v1/realtime/calls``), as OpenAI serves it.

The caller's microphone arrives as an Opus track, the reply leaves as one, and the JSON events
travel on the ``oai-events`` data channel, minus the audio deltas (the track carries that audio).
The worker serves the same realtime session as for a WebSocket, at PCM16 24 kHz both ways: the call
fixes the formats (a client's ``session.update`` cannot change them) and turns the worker's audio
deltas into track audio. The call says ``output_audio_buffer.started`` when a response's audio
begins to play, ``.stopped`` when it has all played, and ``.cleared`` when it was cut (a barge-in,
``response.cancel``, the client's ``output_audio_buffer.clear``).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from omnivox.protocol.media import MediaBridge, Route
from omnivox.protocol.realtime import events as ev

RATE = 24000
PCM = {"type": "audio/pcm", "rate": RATE}
_AUDIO_DELTAS = {"response.output_audio.delta", "response.audio.delta"}
_FORMAT_FIELDS = ("input_audio_format", "output_audio_format")


def _fixed_formats(session: dict[str, Any]) -> dict[str, Any]:
    """``session`` with both audio formats set to what the call carries (PCM16 24 kHz)."""
    out = {k: v for k, v in session.items() if k not in _FORMAT_FIELDS}
    audio = dict(out.get("audio") or {})
    for side in ("input", "output"):
        part = dict(audio.get(side) or {})
        part["format"] = PCM
        audio[side] = part
    out["audio"] = audio
    return out


class RealtimeMedia(MediaBridge):
    channel_label = "oai-events"
    input_rate = RATE
    output_rate = RATE

    def preamble(self, session: dict[str, Any] | None) -> list[str]:
        patch = _fixed_formats({"type": "realtime", **(session or {})})
        return [json.dumps({"type": "session.update", "event_id": "omnivox_call", "session": patch})]

    def audio_in(self, pcm16: bytes) -> str:
        return json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm16).decode()})

    def client_frame(self, frame: str) -> str | None:
        try:
            event = json.loads(frame)
        except ValueError:
            return frame  # the worker says what is wrong with it
        if (
            isinstance(event, dict)
            and event.get("type") in ("session.update", "transcription_session.update")
            and isinstance(event.get("session"), dict)
        ):
            event["session"] = _fixed_formats(event["session"])
            return json.dumps(event)
        return frame

    def route(self, frame: str) -> Route:
        try:
            event = json.loads(frame)
        except ValueError:
            return Route(event=frame)
        kind = event.get("type") if isinstance(event, dict) else None
        if kind in _AUDIO_DELTAS:
            try:
                audio = base64.b64decode(event.get("delta") or "", validate=True)
            except (binascii.Error, ValueError):
                audio = b""
            return Route(audio=audio, response_id=event.get("response_id"))
        if kind == "response.done":
            response = event.get("response") or {}
            rid = response.get("id")
            return Route(
                event=frame, response_id=rid, audio_over=True, clear=response.get("status") == "cancelled"
            )
        if kind == "output_audio_buffer.cleared":
            return Route(event=frame, response_id=event.get("response_id"), clear=True, cleared_event=True)
        if kind == "conversation.item.truncated":
            return Route(event=frame, clear=True)  # whatever still plays was not heard
        return Route(event=frame)

    def playback(self, kind: str, response_id: str) -> str:
        events = {
            "started": ev.OutputAudioStarted,
            "stopped": ev.OutputAudioStopped,
            "cleared": ev.OutputAudioCleared,
        }
        return events[kind](response_id=response_id).model_dump_json()


REALTIME_MEDIA = RealtimeMedia()
