"""How a full-duplex session reads as a timeline (see ``protocol.timelines.reader``).

The client streams its microphone as ``audio_chunk`` messages (float32 or PCM16 at the prepared
``sample_rate``) with camera frames in omni mode; the model answers every unit with a ``result``: a
listening unit, or a speaking one with text and PCM16 speech. The assistant's turn starts with its
first speaking unit and ends with ``end_of_turn``; a listening unit that ends a turn means the model
yielded mid-reply (the user talked over it), and clients drop what they still had queued: a barge-in.
The protocol does not say when the user speaks; the recording finds that in the user's audio.
"""

from __future__ import annotations

from typing import Any

from omnivox.protocol.timelines.reader import (
    AssistantCutOff,
    Audio,
    Config,
    Event,
    Image,
    Marker,
    Text,
    TimelineReader,
    TurnEnd,
    TurnFigures,
    TurnStart,
    b64,
    dict_field,
    error_event,
    record_choice,
)

_MARKERS = {"pause", "resume", "stop", "paused", "resumed", "stopped", "timeout"}


class DuplexTimeline(TimelineReader):
    def __init__(self) -> None:
        self._rate = 16000  # the prepared sample rate of the user's audio
        self._speaking = False

    def client(self, kind: str, msg: dict[str, Any]) -> list[Event]:
        if kind == "audio_chunk":
            fmt = msg.get("format", "float32")
            events: list[Event] = []
            if fmt in ("float32", "pcm16"):
                events.append(Audio("user", b64(msg["audio_base64"]), fmt, self._rate))
            for frame in msg.get("frame_base64_list") or []:
                events.append(Image(b64(frame), "frame"))
            return events
        if kind == "prepare":
            config = dict_field(msg, "config")
            rate = config.get("sample_rate", 16000)
            self._rate = rate if isinstance(rate, int) and 8000 <= rate <= 48000 else 16000
            values = {"config": config, "system_prompt": str(msg.get("system_prompt") or "")}
            return [*record_choice(msg.get("record")), Config(values)]
        if kind in _MARKERS:
            return [Marker(kind, {k: v for k, v in msg.items() if k in ("timeout",)})]
        return []

    def server(self, kind: str, msg: dict[str, Any]) -> list[Event]:
        if kind == "result":
            return self._result(msg)
        if kind == "prepared":
            return [Config({k: msg[k] for k in ("mode", "config", "vision") if k in msg})]
        if kind == "error":
            return error_event(msg)
        if kind in _MARKERS:
            return [Marker(kind, {k: v for k, v in msg.items() if k in ("reason", "units", "timeout_s")})]
        return []

    def _result(self, msg: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        if msg.get("lagging"):
            events.append(Marker("lagging", {"merged_chunks": msg.get("merged_chunks", 1)}))
        if msg.get("is_listen", True):
            if msg.get("end_of_turn") and self._speaking:
                self._speaking = False
                events += [AssistantCutOff("yielded"), TurnEnd("assistant", status="interrupted")]
            return events
        if not self._speaking:
            self._speaking = True
            events.append(TurnStart("assistant"))
            events.append(TurnFigures(_unit_figures(msg)))
        if msg.get("text"):
            events.append(Text("assistant", str(msg["text"]), final=False))
        if msg.get("audio_data"):
            rate = int(msg.get("audio_sample_rate") or 24000)
            events.append(Audio("assistant", b64(msg["audio_data"]), "pcm16", rate))
        if msg.get("end_of_turn"):
            self._speaking = False
            events.append(TurnEnd("assistant"))
        return events


def _unit_figures(msg: dict[str, Any]) -> dict[str, float | int | bool]:
    """The first speaking unit's costs: how long the model took to start the reply."""
    names = {
        "wall_clock_ms": "unit_wall_clock_s",
        "cost_prefill_ms": "unit_prefill_s",
        "cost_generate_ms": "unit_generate_s",
    }
    return {out: msg[name] / 1000 for name, out in names.items() if isinstance(msg.get(name), int | float)}
