"""Driving a scheduler in a test: messages in, the outbox drained until a condition holds."""

from __future__ import annotations

import time
from collections.abc import Callable

from omnivox.pipeline.scheduler import IncomingMessage, OutgoingMessage, Scheduler


def collect(s: Scheduler, until: Callable[[list[OutgoingMessage]], bool], timeout: float = 10.0):
    got: list[OutgoingMessage] = []
    deadline = time.monotonic() + timeout
    while not until(got):
        assert time.monotonic() < deadline, f"timed out with {got}"
        got.extend(s.outbox.drain())
        time.sleep(0.002)
    return got


def ends(n: int):
    return lambda got: sum(o.type in ("result", "error") for o in got) >= n


def has(rid: str, kind: str = "result"):
    return lambda got: any(o.request_id == rid and o.type == kind for o in got)


def new(rid: str, **data) -> IncomingMessage:
    return IncomingMessage(rid, "new_request", data)


def chunk(rid: str, **data) -> IncomingMessage:
    return IncomingMessage(rid, "stream_chunk", data)


def done(rid: str, **data) -> IncomingMessage:
    return IncomingMessage(rid, "stream_done", data)


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.002)
