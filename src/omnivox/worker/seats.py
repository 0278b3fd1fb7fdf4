"""Seats: several workers in one worker process (``--seats N``).

A light worker (the pipeline engine: its models live in the stages) spends most of its CPU on
waking up for each 40 ms chunk of one session's audio with its memory gone cold; eight voice agents
in one process cost about half as much each as eight processes (docs/benchmarks.md). A seat is one
engine host with everything the gateway knows a worker by: its own URL (``/seats/N`` of the
process's), registration and heartbeat, health, state and fencing epoch, and its session routes
under that path. So the gateway's pool (one session per worker, epochs, KV-aware routing, health
states) needs no new concept: a process with four seats is four workers that share one event loop,
one Python, one connection to the pipeline and its read-only models (``engines.registry``:
``build_seat_engines``). Each seat's session keeps its own VAD detector (its recurrent state), but
the detectors share the process's one Silero model, and the windows that several seats' input
threads score at the same moment go through it in one call (``voice.vad.batch``). What is per seat
on the wire but not per session goes in one request for the process: the seats' heartbeat
(``worker.registration``) and the gateway's health check (``GET /seats/health``).

A process with one seat (the default) is the worker it always was, at the root of its URL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from omnivox.core.errors import UnknownSeat
from omnivox.protocol.control.workers import SEAT_PREFIX, seat_index, seat_url
from omnivox.worker.host import EngineHost

SEAT_ROUTE = SEAT_PREFIX + "{seat}"  # the path every seated route starts with


@dataclass(frozen=True)
class Seat:
    host: EngineHost
    url: str | None  # where the gateway reaches it (None: the process has no public URL)


class Seats:
    """The seats of one worker process; one seat is the process itself (its routes at the root)."""

    def __init__(self, hosts: Sequence[EngineHost], public_url: str | None) -> None:
        if not hosts:
            raise ValueError("a worker process hosts one seat at least")
        self.seated = len(hosts) > 1
        self.all = [
            Seat(host, seat_url(public_url, i) if public_url and self.seated else public_url)
            for i, host in enumerate(hosts)
        ]

    @property
    def prefix(self) -> str:
        """What each route's path starts with: the seat's (``/seats/{seat}``), or nothing."""
        return SEAT_ROUTE if self.seated else ""

    def find(self, seat: str | None) -> EngineHost:
        """The host of the seat a route's ``{seat}`` names (the only one when not seated), or
        ``UnknownSeat``."""
        if not self.seated:
            return self.all[0].host
        index = seat_index(seat or "", len(self.all))
        if index is None:
            raise UnknownSeat(
                f"this worker process has seats 0 to {len(self.all) - 1}, and no seat {seat!r}",
                seats=len(self.all),
            )
        return self.all[index].host
