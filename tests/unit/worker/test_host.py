"""The worker's engine host: loading, its state machine, one session at a time, stop."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from omnivox.core.errors import IllegalTransition, Interrupted, WorkerBusy
from omnivox.engines.base import GenerateParams, GenResult
from omnivox.engines.echo import EchoEngine
from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.control.workers import WorkerState
from omnivox.worker.host import EngineHost


class Broken(EchoEngine):
    def load(self) -> None:
        raise RuntimeError("no weights here")


async def test_load_then_idle_and_health():
    host = EngineHost(EchoEngine())
    assert host.health().state is WorkerState.LOADING
    await host.load()
    health = host.health()
    assert health.state is WorkerState.IDLE and health.engine == "echo" and health.cached_hash is None


async def test_load_failure_is_error_state_with_reason():
    host = EngineHost(Broken())
    await host.load()
    assert host.state is WorkerState.ERROR
    assert "no weights here" in host.health().error
    with pytest.raises(WorkerBusy):
        await host.acquire()
    with pytest.raises(IllegalTransition):
        host.transition(WorkerState.BUSY_STREAMING)


async def test_one_session_at_a_time():
    host = EngineHost(EchoEngine(), session_wait_s=0.2)
    await host.load()
    await host.acquire()
    host.transition(WorkerState.BUSY_STREAMING)
    with pytest.raises(WorkerBusy):
        await host.acquire()
    await host.release()
    assert host.state is WorkerState.IDLE and host.sessions_served == 1
    await asyncio.wait_for(host.acquire(), 1)
    await host.release()


async def test_generate_stops_and_abandoned_stream_waits_for_engine():
    host = EngineHost(EchoEngine(word_delay_s=0.01))
    await host.load()
    words = " ".join(f"w{i}" for i in range(200))
    stats = await host.prefill([ChatMessage(role="user", content=words)], clear=True)
    assert stats.cached_tokens == 0 and stats.input_tokens == 201
    stop, result = threading.Event(), GenResult()
    got = []
    async for chunk in host.generate(GenerateParams(max_new_tokens=500), stop, result):
        got.append(chunk.text_delta)
        if len(got) == 3:
            stop.set()
    assert result.stopped and len(got) <= 4
    assert host.engine.held_messages()[-1].content == result.text
    # a consumer that walks away mid-stream: the engine thread is finished when aclose returns
    stream = host.generate(GenerateParams(max_new_tokens=500), threading.Event(), GenResult())
    await stream.__anext__()
    await stream.aclose()
    assert host.health().cached_hash is not None


async def test_release_interrupts_work_still_running_and_clears_it_for_the_next_session():
    seen: list[bool] = []

    class Slow(EchoEngine):
        def prefill(self, messages):
            for _ in range(100):
                if self.interrupt.is_set():
                    seen.append(True)
                    raise Interrupted("stopped")
                time.sleep(0.01)
            seen.append(False)
            return super().prefill(messages)

    host = EngineHost(Slow())
    await host.load()
    await host.acquire()
    work = asyncio.ensure_future(host.prefill([ChatMessage(role="user", content="hi")], clear=False))
    await asyncio.sleep(0.05)
    work.cancel()  # the session's task is torn down; the engine thread runs on
    await host.release()
    assert seen == [True]  # it stopped early, not after its full second
    assert not host.engine.interrupt.is_set()  # the next session starts clean


class Closing(EchoEngine):
    """Records the thread its ``close`` ran in; ``stuck`` makes it hang, ``broken`` raise."""

    def __init__(self, stuck: threading.Event | None = None, broken: bool = False) -> None:
        super().__init__()
        self.closed_in: str | None = None
        self.stuck, self.broken = stuck, broken

    def close(self) -> None:
        self.closed_in = threading.current_thread().name
        if self.broken:
            raise RuntimeError("the model's memory would not go")
        if self.stuck is not None:
            self.stuck.wait(5)


async def test_close_releases_the_engine_in_its_own_thread() -> None:
    engine = Closing()
    host = EngineHost(engine)
    await host.load()
    await host.close()
    assert engine.closed_in is not None and engine.closed_in.startswith("engine")


async def test_close_goes_on_past_an_engine_that_fails_or_hangs_closing() -> None:
    broken = EngineHost(Closing(broken=True))
    await broken.close()  # logged, not raised: the other seats still close
    stuck = threading.Event()
    hung = EngineHost(Closing(stuck=stuck))
    await asyncio.wait_for(hung.close(timeout_s=0.2), 2)  # the process's exit is not held
    stuck.set()
