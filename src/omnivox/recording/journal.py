"""The journal: one JSON line per timeline event, appended while a session records (a crash loses
at most the last batch), read back whole when it ends (``finalize``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from omnivox.protocol.timelines.reader import (
    ErrorEvent,
    Event,
    Marker,
    Text,
    TurnEnd,
    TurnFigures,
    TurnStages,
    TurnStart,
)


def describe(event: Event) -> dict[str, Any]:
    """A timeline event as its journal line (without its time)."""
    if isinstance(event, Text):
        return {
            "type": "text",
            "role": event.role,
            "text": event.text,
            "final": event.final,
            "source": event.source,
        }
    if isinstance(event, TurnStart | TurnEnd):
        line: dict[str, Any] = {
            "type": "turn_start" if isinstance(event, TurnStart) else "turn_end",
            "role": event.role,
        }
        if event.audio_ms is not None:
            line["audio_ms"] = event.audio_ms
        if isinstance(event, TurnStart) and event.ref is not None:
            line["ref"] = event.ref
        if isinstance(event, TurnEnd):
            line["status"] = event.status
        return line
    if isinstance(event, ErrorEvent):
        return {"type": "error", "code": event.code, "message": event.message}
    if isinstance(event, TurnFigures):
        return {"type": "figures", "values": event.values, "next_turn": event.next_turn}
    if isinstance(event, TurnStages):
        return {"type": "stages", "stages": event.stages}
    if isinstance(event, Marker):
        return {"type": "marker", "name": event.name, **({"detail": event.detail} if event.detail else {})}
    return {"type": type(event).__name__.lower()}


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")
