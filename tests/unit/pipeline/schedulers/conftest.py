"""Schedulers started for a test and stopped (their outbox closed) after it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from omnivox.pipeline.scheduler import Scheduler


@pytest.fixture
def started() -> Iterator[Callable[[Scheduler], Scheduler]]:
    made: list[Scheduler] = []

    def start(s: Scheduler) -> Scheduler:
        s.start()
        made.append(s)
        return s

    yield start
    for s in made:
        s.stop()
        s.outbox.close()
