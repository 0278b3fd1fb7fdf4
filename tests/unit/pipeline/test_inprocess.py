"""The pipeline end to end inside one process: routing, streaming, fan-in, aborts, errors."""

from __future__ import annotations

import numpy as np
import pytest

from inprocess_pipeline import spec_of
from omnivox.core.errors import EngineFailure, OmnivoxError
from omnivox.pipeline.relay import segments

NOOP3 = [
    {"name": "a", "scheduler": "simple", "model": "noop", "next": ["b"]},
    {"name": "b", "scheduler": "simple", "model": "noop", "next": ["c"]},
    {"name": "c", "scheduler": "simple", "model": "noop", "next": ["client"]},
]


def result_of(request, timeout: float = 10.0):
    while True:
        event = request.next(timeout)
        assert event is not None, "no result in time"
        if event.kind == "result":
            return event


def test_a_request_goes_through_three_stages_with_its_arrays(pipeline) -> None:
    running = pipeline(spec_of(*NOOP3))
    client = running.client()
    audio = np.arange(48_000, dtype=np.float32)  # 192 KB: through shared memory
    ids = np.arange(5, dtype=np.int64)  # small: in a frame
    event = result_of(client.submit({"audio": audio, "ids": ids, "text": "hi"}))
    assert event.values["text"] == "hi"
    np.testing.assert_array_equal(event.values["audio"], audio)
    np.testing.assert_array_equal(event.values["ids"], ids)
    assert event.parts is not None and list(event.parts) == ["c"]
    assert [s for s in segments() if s.startswith(f"ovx_{__import__('os').getpid()}_")] == []


def collect(request, timeout: float = 10.0):
    """(stream events, the result event)."""
    streamed = []
    while True:
        event = request.next(timeout)
        assert event is not None, "no result in time"
        if event.kind == "result":
            return streamed, event
        streamed.append(event)


def test_a_stage_streams_into_a_streaming_stage_and_both_reach_the_client(pipeline) -> None:
    spec = spec_of(
        {
            "name": "writer",
            "scheduler": "simple",
            "model": "noop",
            "options": {"stream": 3},
            "next": ["speaker", "client"],
            "stream": ["speaker", "client"],
        },
        {
            "name": "speaker",
            "scheduler": "streaming",
            "model": "echo",
            "slots": 2,
            "next": ["client"],
            "stream": ["client"],
        },
    )
    running = pipeline(spec)
    streamed, result = collect(running.client().submit({"word": "hello"}))
    by_source = {}
    for event in streamed:
        by_source.setdefault(event.source, []).append(event.values["word"])
    assert by_source == {"writer": ["hello"] * 3, "speaker": ["hello"] * 3}
    assert result.parts["speaker"] == {"chunks": 3}
    assert result.parts["writer"]["word"] == "hello"


def test_a_fan_in_stage_waits_for_all_its_inputs(pipeline) -> None:
    spec = spec_of(
        {"name": "audio", "scheduler": "simple", "model": "noop", "next": ["join"]},
        {"name": "image", "scheduler": "simple", "model": "noop", "next": ["join"]},
        {"name": "join", "scheduler": "simple", "model": "noop", "next": ["client"]},
    )
    running = pipeline(spec)
    pixels = np.ones((64, 64, 3), np.uint8)
    _, result = collect(running.client().submit({"pixels": pixels, "n": 1}))
    assert set(result.values) == {"audio", "image"}  # one input per source
    np.testing.assert_array_equal(result.values["image"]["pixels"], pixels)


def test_a_fan_in_stage_reads_its_inputs_in_the_plan_s_order_whichever_came_first(pipeline) -> None:
    spec = spec_of(
        {
            "name": "audio",
            "scheduler": "simple",
            "model": "noop",
            "next": ["join"],
            "options": {"sleep_ms": 300},
        },
        {"name": "image", "scheduler": "simple", "model": "noop", "next": ["join"]},
        {"name": "join", "scheduler": "simple", "model": "noop", "next": ["client"]},
    )
    running = pipeline(spec)
    _, result = collect(running.client().submit({"n": 1}))  # the image's input is there first
    assert list(result.values) == ["audio", "image"]


def test_a_client_streams_into_the_entry_stage(pipeline) -> None:
    spec = spec_of(
        {"name": "asr", "scheduler": "streaming", "model": "echo", "slots": 1, "stream": ["client"]}
    )
    running = pipeline(spec)
    request = running.client().submit({})
    for i in range(5):
        request.stream({"i": i, "audio": np.full(20_000, i, np.float32)})
    request.done()
    streamed, result = collect(request)
    assert [e.values["i"] for e in streamed] == [0, 1, 2, 3, 4]
    assert result.values == {"chunks": 5}


def test_a_failing_stage_fails_the_request_with_its_code(pipeline) -> None:
    running = pipeline(spec_of({"name": "x", "scheduler": "simple", "model": "fail"}))
    with pytest.raises(OmnivoxError) as info:
        collect(running.client().submit({"a": 1}))
    assert info.value.code == EngineFailure.code
    assert running.coordinator.counts["failed"] == 1


def test_an_unknown_route_is_refused_as_data(pipeline) -> None:
    running = pipeline(spec_of(*NOOP3))
    with pytest.raises(OmnivoxError) as info:
        collect(running.client().submit({}, entries=["nope"]))
    assert info.value.code == "invalid_message"
    with pytest.raises(OmnivoxError):
        collect(running.client().submit({}, entries=["c"], exits=["a"]))  # no path back up


def test_abort_stops_a_request_everywhere_and_unknown_aborts_are_harmless(pipeline) -> None:
    spec = spec_of(
        {
            "name": "slow",
            "scheduler": "parallel",
            "model": "noop",
            "slots": 2,
            "options": {"sleep_ms": 60_000},
        }
    )
    running = pipeline(spec)
    client = running.client()
    request = client.submit({"x": 1})
    import time

    deadline = time.monotonic() + 5
    while running.stages["slow"].scheduler.load()["running"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    request.abort()
    request.abort()  # twice: harmless
    client.submit({}).abort()  # at once
    deadline = time.monotonic() + 5
    while running.stages["slow"].scheduler.load()["running"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert running.stages["slow"].scheduler.load()["running"] == 0
    # and the stage still serves
    spec2_result = client.submit({"y": 2})
    spec2_result.abort()
    deadline = time.monotonic() + 5  # an abort is a message: the coordinator counts it when it comes
    while running.coordinator.counts["aborted"] < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert running.coordinator.counts["aborted"] == 3
