"""What ``bench conversation`` counts per voice, and its table row (see ``bench.conversation``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omnivox.bench.table import percentile

EVENTS = ("echo", "backchannel", "noise", "barge_in")  # what a caller does one second into a reply
COLUMNS = [
    "voice",
    "false: echo",
    "false: backchannel",
    "false: noise",
    "noise resumed",
    "barge-ins missed",
    "reaction p50 ms",
    "reaction p95 ms",
    "EOT right/early/late",
    "v2v p50 ms",
    "v2v p95 ms",
    "errors",
]


@dataclass
class Tally:
    false: dict[str, int] = field(default_factory=lambda: {"echo": 0, "backchannel": 0, "noise": 0})
    tried: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EVENTS, 0))
    replies: int = 0  # replies played (each one over its own echo)
    echo_pauses: int = 0  # replies paused by their echo (then resumed, or cut: false above)
    noise_resumed: int = 0
    noise_unheard: int = 0
    missed: int = 0
    reaction_s: list[float] = field(default_factory=list)
    eot: dict[str, int] = field(default_factory=lambda: {"right": 0, "early": 0, "late": 0})
    v2v_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)  # per turn, for --json


def row(name: str, t: Tally) -> list[Any]:
    noise_paused = t.tried["noise"] - t.noise_unheard
    return [
        name,
        f"{t.false['echo']}/{t.replies} ({t.echo_pauses} paused)",
        f"{t.false['backchannel']}/{t.tried['backchannel']}",
        f"{t.false['noise']}/{t.tried['noise']}",
        f"{t.noise_resumed}/{noise_paused} ({t.noise_unheard} unheard)",
        f"{t.missed}/{t.tried['barge_in']}",
        percentile(t.reaction_s, 50) * 1000,
        percentile(t.reaction_s, 95) * 1000,
        f"{t.eot['right']}/{t.eot['early']}/{t.eot['late']}",
        percentile(t.v2v_s, 50) * 1000,
        percentile(t.v2v_s, 95) * 1000,
        len(t.errors),
    ]
