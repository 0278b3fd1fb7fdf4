"""Model-free stages: what the overhead benchmark and the fault tests run, on any scheduler.

- ``noop``: the input is the result. ``options.sleep_ms`` (or the request's own ``sleep_ms``) holds
  each request that long, or until it is aborted (so a test can kill a stage while requests are in
  flight); ``options.stream`` streams the input that many times first.
- ``echo``: a stream in, the same chunks out, then the number of chunks as the result (streaming).
- ``count``: an AR stage whose "model" counts: request ``{"tokens": n}`` streams 0..n-1 (ar).
- ``fail``: every request fails with ``engine_error`` (on every scheduler).

On the ``ar`` scheduler every other model counts, on ``streaming`` every other model echoes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from omnivox.core.errors import EngineFailure
from omnivox.pipeline.scheduler import Scheduler
from omnivox.pipeline.schedulers.ar import ARScheduler
from omnivox.pipeline.schedulers.parallel import ParallelScheduler
from omnivox.pipeline.schedulers.simple import SimpleScheduler
from omnivox.pipeline.schedulers.streaming import StreamingScheduler
from omnivox.pipeline.spec import StageSpec

Values = dict[str, Any]
BUILTIN_MODELS = ("noop", "echo", "count", "fail")


def _noop(options: dict[str, Any]) -> Callable[[Values], Values | Iterator[Values]]:
    sleep_s = float(options.get("sleep_ms", 0)) / 1000
    streams = int(options.get("stream", 0))

    def compute(values: Values) -> Values | Iterator[Values]:
        wait_s = float(values["sleep_ms"]) / 1000 if "sleep_ms" in values else sleep_s
        if wait_s:
            time.sleep(wait_s)
        if not streams:
            return values

        def chunks() -> Generator[Values, None, Values]:
            for _ in range(streams):
                yield values
            return values

        return chunks()

    return compute


def _fail(values: Values) -> Values:
    raise EngineFailure("this stage fails every request (model 'fail')")


@dataclass
class _Echo:
    slot: int | None
    chunks: list[Values] = field(default_factory=list)
    ended: bool = False
    count: int = 0


class EchoHandler:
    """A stream handler that says back what it hears (the streaming scheduler's test model)."""

    def __init__(self, fail: bool = False) -> None:
        self.resets: list[int] = []
        self.fail = fail

    def needs_slot(self, data: Values) -> bool:
        return not data.get("oneshot", False)

    def open(self, slot: int | None, data: Values) -> _Echo:
        if self.fail:
            _fail(data)
        state = _Echo(slot)
        if data.get("oneshot"):
            state.chunks.append(data)
            state.ended = True
        return state

    def chunk(self, state: _Echo, data: Values) -> None:
        state.chunks.append(data)

    def done(self, state: _Echo, data: Values) -> None:
        state.ended = True

    def pending(self, state: _Echo) -> bool:
        return bool(state.chunks) or state.ended

    def step(self, states: list[_Echo]) -> list[list[tuple[Literal["stream", "result"], Values]]]:
        outs: list[list[tuple[Literal["stream", "result"], Values]]] = []
        for state in states:
            out: list[tuple[Literal["stream", "result"], Values]] = []
            for chunk in state.chunks:
                state.count += 1
                out.append(("stream", chunk))
            state.chunks = []
            if state.ended:
                out.append(("result", {"chunks": state.count}))
            outs.append(out)
        return outs

    def close(self, state: _Echo) -> None:
        state.chunks = []

    def reset_slot(self, slot: int) -> None:
        self.resets.append(slot)


@dataclass
class _Count:
    goal: int
    made: list[int] = field(default_factory=list)


class CountRunner:
    """An AR runner without a model: request ``{"tokens": n}`` decodes 0, 1, ..., n-1."""

    def __init__(self, fail: bool = False) -> None:
        self.live = 0
        self.batches: list[int] = []
        self.fail = fail

    def prefill(self, data: Values) -> _Count:
        if self.fail:
            _fail(data)
        goal = int(data.get("tokens", 4))
        if goal < 1:
            raise ValueError("tokens must be >= 1")
        self.live += 1
        return _Count(goal)

    def decode(self, states: list[_Count]) -> list[int]:
        self.batches.append(len(states))
        return [len(s.made) for s in states]

    def accept(self, state: _Count, token: int) -> tuple[Values | None, bool]:
        state.made.append(token)
        return {"token": token}, len(state.made) >= state.goal

    def result(self, state: _Count) -> Values:
        return {"tokens": list(state.made)}

    def release(self, state: _Count) -> None:
        self.live -= 1


def build_builtin(spec: StageSpec) -> Scheduler | None:
    """The scheduler for a model-free stage, or None if ``spec.model`` is not one of them."""
    if spec.model not in BUILTIN_MODELS:
        return None
    options = spec.options
    info = {"model": spec.model}
    if spec.scheduler == "ar":
        return ARScheduler(CountRunner(fail=spec.model == "fail"), max_running=spec.batch, info=info)
    if spec.scheduler == "streaming":
        return StreamingScheduler(EchoHandler(fail=spec.model == "fail"), spec.slots, info=info)
    compute = _fail if spec.model == "fail" else _noop(options)
    if spec.scheduler == "parallel":
        sleep_s = float(options.get("sleep_ms", 0)) / 1000

        def run(values: Values, stop: threading.Event, emit: Callable[[Values], None]) -> Values:
            wait_s = float(values["sleep_ms"]) / 1000 if "sleep_ms" in values else sleep_s
            if wait_s and stop.wait(wait_s):
                return {}
            if spec.model == "fail":
                _fail(values)
            return values

        return ParallelScheduler(run, slots=spec.slots, info=info)
    return SimpleScheduler(compute, max_batch=spec.batch, info=info)
