"""Driving a stage model's scheduler in a test: typed chunks in, the outbox drained until a
condition holds."""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from omnivox.pipeline.models.voice_chunks import reply_output, to_values
from omnivox.pipeline.scheduler import IncomingMessage, OutgoingMessage, Scheduler


def drain(
    s: Scheduler, until: Callable[[list[OutgoingMessage]], bool], timeout: float = 5.0
) -> list[OutgoingMessage]:
    got: list[OutgoingMessage] = []
    deadline = time.monotonic() + timeout
    while not until(got):
        assert time.monotonic() < deadline, got
        got.extend(s.outbox.drain())
        time.sleep(0.002)
    return got


def chunk(rid: str, message: msgspec.Struct) -> IncomingMessage:
    return IncomingMessage(rid, "stream_chunk", to_values(message))


def opened(rid: str, message: msgspec.Struct | None = None) -> IncomingMessage:
    """A request's start: with ``message``, or as a stream opened by its first chunk."""
    return IncomingMessage(rid, "new_request", to_values(message) if message else {"streaming": True})


def spoken(o: OutgoingMessage) -> str:
    return reply_output(o.data).text
