"""The one thread-to-event-loop bridge: items in order on the loop, errors raised there, the thread
stopped and waited for however the reader leaves."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from omnivox.agent.threads import SerialThread, ThreadStream, iterate_in_thread


@pytest.fixture
def executor():
    with ThreadPoolExecutor(1, thread_name_prefix="bridge-test") as pool:
        yield pool


async def test_items_come_in_order_from_the_thread(executor) -> None:
    names: list[str] = []

    def items() -> Iterator[int]:
        names.append(threading.current_thread().name)
        yield from range(5)

    got = [i async for i in iterate_in_thread(items, executor, threading.Event())]
    assert got == [0, 1, 2, 3, 4] and names[0].startswith("bridge-test")


async def test_an_error_in_the_thread_is_raised_to_the_reader_after_what_came_before(executor) -> None:
    def items() -> Iterator[str]:
        yield "a"
        raise ValueError("model fault")

    got = []
    with pytest.raises(ValueError, match="model fault"):
        async for item in iterate_in_thread(items, executor, threading.Event()):
            got.append(item)
    assert got == ["a"]


async def test_a_reader_that_leaves_stops_the_thread_and_waits_for_it(executor) -> None:
    stop, finished = threading.Event(), threading.Event()

    def items() -> Iterator[int]:
        n = 0
        while not stop.is_set():
            yield n
            n += 1
            stop.wait(0.01)
        finished.set()

    async with asyncio.timeout(5), contextlib.aclosing(iterate_in_thread(items, executor, stop)) as numbers:
        async for n in numbers:
            if n == 2:
                break
    assert stop.is_set() and finished.is_set()  # closed: the thread has ended


async def test_a_cut_reader_gets_none_at_once_and_close_stops_the_thread(executor) -> None:
    stop, started = threading.Event(), threading.Event()

    def items() -> Iterator[int]:
        started.set()
        stop.wait(5)
        yield from ()

    stream: ThreadStream[int] = ThreadStream(items, executor, stop)
    stream.start()
    await asyncio.to_thread(started.wait, 2)
    cut = asyncio.Event()
    cut.set()
    assert await stream.next(cut) is None
    await stream.close(wait_s=2)
    assert stop.is_set()
    assert await stream.next() is None  # the thread ended: nothing more comes


# ---- SerialThread: the input thread's hand-off


async def test_calls_run_on_the_one_thread_in_the_order_they_were_given() -> None:
    thread = SerialThread("serial-test")
    ran: list[tuple[int, str]] = []

    def note(i: int) -> int:
        ran.append((i, threading.current_thread().name))
        return i * 2

    results = await asyncio.gather(*(thread.call(note, i) for i in range(50)))
    thread.shutdown()
    assert results == [i * 2 for i in range(50)]
    assert [i for i, _ in ran] == list(range(50))
    assert {name for _, name in ran} == {"serial-test"}


async def test_an_error_reaches_the_awaiter_and_the_thread_goes_on() -> None:
    thread = SerialThread("serial-test")

    def broken() -> None:
        raise ValueError("bad chunk")

    with pytest.raises(ValueError, match="bad chunk"):
        await thread.call(broken)
    assert await thread.call(lambda: 7) == 7
    thread.shutdown()


async def test_a_call_cancelled_before_it_starts_never_runs() -> None:
    thread = SerialThread("serial-test")
    gate, ran = threading.Event(), []
    blocking = thread.call(gate.wait)
    skipped = thread.call(ran.append, "skipped")
    skipped.cancel()
    gate.set()
    await blocking
    await thread.call(ran.append, "after")
    thread.shutdown()
    assert ran == ["after"]


async def test_shutdown_runs_what_was_queued_then_ends_the_thread() -> None:
    thread = SerialThread("serial-test")
    gate, ran = threading.Event(), []
    thread.call(gate.wait)
    queued = [thread.call(ran.append, i) for i in range(3)]
    gate.set()
    await asyncio.to_thread(thread.shutdown, True)
    assert ran == [0, 1, 2] and not thread.alive
    await asyncio.gather(*queued)  # every awaiter got its outcome: nothing left hanging
    with pytest.raises(RuntimeError):
        thread.call(ran.append, 3)
    assert ran == [0, 1, 2]


async def test_shutdown_cancelling_drops_the_queued_calls_and_their_awaiters_see_it() -> None:
    thread = SerialThread("serial-test")
    gate, started, ran = threading.Event(), threading.Event(), []

    def block() -> bool:
        started.set()
        return gate.wait(10)

    running = thread.call(block)
    assert await asyncio.to_thread(started.wait, 10)  # (taken by the thread: not in the queue)
    queued = thread.call(ran.append, "dropped")
    submitted = thread.submit(ran.append, "dropped too")
    thread.shutdown(wait=False, cancel_futures=True)  # the queue is dropped before this returns
    assert submitted.cancelled()
    gate.set()
    await asyncio.to_thread(thread.shutdown, True)  # (again: only waits for the thread)
    assert await running is True  # the call that had started finished
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert ran == [] and not thread.alive


async def test_submit_serves_run_in_executor_and_thread_streams() -> None:
    thread = SerialThread("serial-test")
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(thread, sum, [1, 2, 3]) == 6
    assert thread.submit(lambda a, b=0: a + b, 1, b=2).result() == 3
    got = [item async for item in iterate_in_thread(lambda: iter([1, 2, 3]), thread, threading.Event())]
    assert got == [1, 2, 3]
    thread.shutdown()


async def test_a_dropped_thread_without_shutdown_still_ends() -> None:
    thread = SerialThread("serial-test")
    assert await thread.call(lambda: 1) == 1
    runner = thread._thread
    del thread
    gc.collect()
    await asyncio.to_thread(runner.join, 10)
    assert not runner.is_alive()
