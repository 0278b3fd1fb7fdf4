"""Pipelines started inside the test process (tests/inprocess_pipeline.py), stopped after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from inprocess_pipeline import Running, start_pipeline


@pytest.fixture
def pipeline() -> Iterator[Callable[..., Running]]:
    made: list[Running] = []

    def start(*args, **kwargs) -> Running:
        running = start_pipeline(*args, **kwargs)
        made.append(running)
        return running

    yield start
    for running in made:
        running.stop()
