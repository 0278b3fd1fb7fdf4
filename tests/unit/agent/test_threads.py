"""The one thread-to-event-loop bridge: items in order on the loop, errors raised there, the thread
stopped and waited for however the reader leaves."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from omnivox.agent.threads import ThreadStream, iterate_in_thread


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
