"""Work units: replacement by name, failures reported, and asyncio's cancellation rules."""

from __future__ import annotations

import asyncio

import pytest

from omnivox.connection.units import WorkUnits


async def test_units_replace_by_name_and_report_failures() -> None:
    failures = []
    units = WorkUnits(lambda name, exc: failures.append((name, str(exc))))
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            cancelled.set()

    async def broken() -> None:
        raise RuntimeError("bad")

    await units.start("response", forever())
    await asyncio.sleep(0)  # let it start
    assert units.running("response")
    await units.start("response", broken())  # replaces: the first is cancelled before this starts
    assert cancelled.is_set()
    await asyncio.sleep(0.01)
    assert failures == [("response", "bad")] and not units.running("response")
    await units.start("idle", forever())
    await units.close()
    assert not units.running("idle")


async def test_a_caller_cancelled_while_waiting_for_a_unit_to_stop_is_cancelled() -> None:
    """The waiting caller gets its CancelledError (never swallowed); the unit still stops."""
    stuck: list[str] = []
    units = WorkUnits(lambda name, exc: None, cancel_timeout_s=5.0, on_stuck=stuck.append)
    release = asyncio.Event()
    unit_stopped = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            await release.wait()  # takes its time to wind down
            unit_stopped.set()

    await units.start("tts", slow_to_stop())
    await asyncio.sleep(0)
    caller = asyncio.create_task(units.cancel("tts"))
    await asyncio.sleep(0.01)  # the caller is waiting for the unit to stop
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert caller.cancelled()
    release.set()
    await asyncio.wait_for(unit_stopped.wait(), 1)
    assert not units.running("tts") and stuck == []


async def test_a_unit_may_end_itself_without_a_pending_cancellation() -> None:
    """A unit that cancels (or replaces) itself runs on to its own end, uncancelled."""
    units = WorkUnits(lambda name, exc: None)
    after: list[str] = []

    async def idle() -> None:
        await units.cancel("idle")  # e.g. the idle timer starting a response cancels the timer
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0
        await asyncio.sleep(0.01)  # would raise if a cancellation were pending
        after.append("went on")
        await units.start("idle", asyncio.sleep(0))  # replacing itself is allowed too
        after.append("still going")

    task = await units.start("idle", idle())
    await asyncio.wait_for(task, 1)
    assert after == ["went on", "still going"] and not task.cancelled()


async def test_a_unit_that_ignores_cancellation_is_reported_after_its_timeout() -> None:
    stuck: list[str] = []
    units = WorkUnits(lambda name, exc: None, cancel_timeout_s=0.05, on_stuck=stuck.append)
    let_go = asyncio.Event()

    async def stubborn() -> None:
        while not let_go.is_set():
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                continue  # ignores cancellation

    await units.start("llm", stubborn())
    await asyncio.sleep(0)
    await units.cancel("llm")
    assert stuck == ["llm"]
    assert len(units) == 1  # still owned, not forgotten
    let_go.set()
    await units.close()  # cancels it again; it now ends
    assert len(units) == 0


async def test_close_stops_every_unit_even_detached_ones() -> None:
    units = WorkUnits(lambda name, exc: None)
    ran = asyncio.Event()

    async def detaches() -> None:
        await units.cancel("a")  # detached from its name
        ran.set()
        await asyncio.sleep(60)

    await units.start("a", detaches())
    await units.start("b", asyncio.sleep(60))
    await ran.wait()
    assert len(units) == 2
    await units.close()
    assert len(units) == 0 and not units.running("a") and not units.running("b")


async def test_a_start_that_is_cancelled_before_it_begins_leaves_no_stray_coroutine() -> None:
    units = WorkUnits(lambda name, exc: None, cancel_timeout_s=5.0)
    release = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            await release.wait()

    await units.start("x", slow_to_stop())
    await asyncio.sleep(0)
    started: list[str] = []

    async def never() -> None:
        started.append("ran")

    caller = asyncio.create_task(units.start("x", never()))
    await asyncio.sleep(0.01)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    release.set()
    await units.close()
    assert started == []  # the replacement never started (and was closed, not leaked)
