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

import json
from typing import Any

from omnivox.protocol.media import MediaBridge, Route
from omnivox.protocol.realtime import calls

RATE = 24000
PCM = {"type": "audio/pcm", "rate": RATE}


class RealtimeMedia(MediaBridge):
    channel_label = "oai-events"
    input_rate = RATE
    output_rate = RATE

    def preamble(self, session: dict[str, Any] | None) -> list[str]:
        patch = calls.fixed_formats({"type": "realtime", **(session or {})}, PCM)
        return [json.dumps({"type": "session.update", "event_id": "omnivox_call", "session": patch})]

    def audio_in(self, pcm16: bytes) -> str:
        return calls.append(pcm16)

    def client_frame(self, frame: str) -> str | None:
        return calls.with_fixed_formats(frame, PCM)

    def route(self, frame: str) -> Route:
        try:
            event = json.loads(frame)
        except (ValueError, RecursionError):  # (the worker's frames: passed on as they are)
            return Route(event=frame)
        kind = event.get("type") if isinstance(event, dict) else None
        if kind in calls.AUDIO_DELTAS:
            return Route(audio=calls.delta_audio(event), response_id=event.get("response_id"))
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
        if kind == "omnivox.interruption.paused":
            return Route(event=frame, pause=True)
        if kind == "omnivox.interruption.resumed":
            return Route(event=frame, resume=True)
        return Route(event=frame)

    def playback(self, kind: str, response_id: str) -> str:
        return calls.playback(kind, response_id)

    def playback_report(self, kind: str, response_id: str) -> str | None:
        return calls.playback_report(kind, response_id)


REALTIME_MEDIA = RealtimeMedia()
