"""What a fuzz run saw: each frame's outcome, by the surface it went to and the kind of frame it
was, and the tracebacks the server's processes logged meanwhile.

An outcome is a short label of the server's first reaction to a frame:

- ``error:CODE`` (a WebSocket error message), ``closed:CODE`` (the connection was closed),
  ``reply:TYPE`` (a normal message), ``silent`` (nothing within the reaction window);
- ``http:STATUS`` or ``http:STATUS:CODE`` (an HTTP answer and its error code);
- ``sip:STATUS`` (the first SIP answer to a datagram), ``silent`` for none.

A server fault is an outcome that says the server broke rather than refused: an HTTP 500, a close
1011, a connection dropped without a close (1006: its handler died), an ``internal_error``. A fuzz
run must have none, and no traceback in any log.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

TRACEBACK = "Traceback (most recent call last)"


def is_fault(outcome: str) -> bool:
    parts = outcome.split(":")
    if parts[0] == "http":
        return parts[1] == "500"
    return outcome in ("closed:1011", "closed:1006", "error:internal_error")


@dataclass
class Outcomes:
    """Outcome counts per surface and frame kind; with ``log``, a JSON line per frame."""

    counts: dict[str, dict[str, Counter[str]]] = field(default_factory=lambda: defaultdict(dict))
    log: TextIO | None = None

    def add(self, surface: str, index: int, kind: str, outcome: str) -> None:
        self.counts[surface].setdefault(kind, Counter())[outcome] += 1
        if self.log is not None:
            line = {"surface": surface, "frame": index, "kind": kind, "outcome": outcome}
            self.log.write(json.dumps(line) + "\n")

    def of(self, surface: str) -> Counter[str]:
        """Every outcome of a surface, whatever the frame's kind."""
        total: Counter[str] = Counter()
        for per_kind in self.counts.get(surface, {}).values():
            total.update(per_kind)
        return total

    def faults(self, surface: str) -> int:
        return sum(n for outcome, n in self.of(surface).items() if is_fault(outcome))

    def summary(self, surface: str, top: int = 4) -> str:
        """The commonest outcomes, e.g. ``error:invalid_json 120, silent 80, +3 more``."""
        common = self.of(surface).most_common()
        text = ", ".join(f"{outcome} {n}" for outcome, n in common[:top])
        return text + (f", +{len(common) - top} more" if len(common) > top else "")

    def as_json(self) -> dict[str, Any]:
        return {s: {k: dict(c) for k, c in kinds.items()} for s, kinds in self.counts.items()}


def tracebacks(log_dir: Path) -> dict[str, list[str]]:
    """Per log file under ``log_dir``: each traceback (by the line that ends it: the exception) and
    each ERROR line (``Task was destroyed but it is pending!`` and the like)."""
    found: dict[str, list[str]] = {}
    for path in sorted(log_dir.glob("*.log")):
        lines = path.read_text(errors="replace").splitlines()
        ends = []
        for i, line in enumerate(lines):
            if TRACEBACK in line:
                tail = next((ln for ln in lines[i + 1 :] if ln and not ln.startswith((" ", "\t"))), "")
                ends.append(tail[:200])
            elif " ERROR " in line and "Exception in ASGI application" not in line:
                ends.append(line[:200])  # (uvicorn's line before a traceback is counted with it)
        if ends:
            found[path.name] = ends
    return found
