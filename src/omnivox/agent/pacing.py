"""When a reply's audio may go out: the pace a protocol's listener takes it at.

- ``LeadPacing``: a streaming client (realtime) plays what it is sent as it comes; audio goes out at
  most ``lead_ms`` ahead of real time since the reply began to play, so a barge-in leaves little
  stale audio in the client's buffer.
- ``UnitPacing``: a duplex client is handed audio a unit at a time; each unit ``grant``\\ s up to a
  unit of it, and the reply sends that much and no more until the next unit. ``grant`` returns once
  the reply has sent what it could of it right now (it used the grant up, or it has nothing ready:
  it waits for the models, is paused, or is over), so a unit says what is ready without waiting
  for what is not.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from omnivox.agent.playout import Playback
from omnivox.agent.threads import wait_any

_MAX_TURNS = 100_000  # (a bound on the loop; the deadline is the one that counts)


class Pacing(Protocol):
    async def room(self, playback: Playback, want: int, cut: asyncio.Event) -> int:
        """Wait until some of the next ``want`` samples may go; return how many (returns at once
        when ``cut`` is set)."""
        ...


@dataclass
class LeadPacing:
    """At most ``lead_ms`` of audio ahead of real time since the reply began to play."""

    lead_ms: float

    async def room(self, playback: Playback, want: int, cut: asyncio.Event) -> int:
        if playback.started:
            wait_s = (playback.ahead_ms() - self.lead_ms) / 1000
            if wait_s > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(cut.wait(), wait_s)
        return want


class UnitPacing:
    """Up to what each unit grants (see the module docstring)."""

    def __init__(self) -> None:
        self._credit = 0  # samples the reply may still send in this unit
        self._granted = asyncio.Event()
        self.starved = False  # the reply waits for a grant (it has audio to send)

    async def room(self, playback: Playback, want: int, cut: asyncio.Event) -> int:
        while self._credit <= 0 and not cut.is_set():
            self.starved = True
            self._granted.clear()
            try:
                await wait_any(self._granted, cut)
            finally:
                self.starved = False
        if cut.is_set():
            return want
        n = min(want, self._credit)
        self._credit -= n
        return n

    async def grant(self, samples: int, idle: Callable[[], bool], wait_s: float) -> None:
        """Let up to ``samples`` go out, and return once they have, or once the reply is ``idle``
        (it has nothing ready to send) or waits for more credit, or after ``wait_s``."""
        self._credit = samples
        self._granted.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        # the reply runs on this loop: let it take its turns until it has sent what it could (each
        # turn it sends a frame or takes a piece the models made; a few dozen turns at most)
        for _ in range(_MAX_TURNS):
            await asyncio.sleep(0)
            used_up = self.starved and not self._granted.is_set()
            if used_up or idle() or loop.time() > deadline:
                break
        self._credit = 0
