"""Store operations kept for later: retried in order, each run to its end even when its caller is
cancelled, and what a step dispatched handed on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from omnivox.core.errors import StoreUnavailable
from omnivox.gateway.cluster.pending import Pending


class Store:
    """A store call that fails while ``down`` and records what ran."""

    def __init__(self, reply: Any = "ok") -> None:
        self.down = False
        self.ran: list[tuple[str, tuple[Any, ...]]] = []
        self.reply = reply
        self.gate: asyncio.Event | None = None

    async def call(self, op: str, *args: Any) -> Any:
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise StoreUnavailable("down")
        self.ran.append((op, args))
        return self.reply


def _pending(store: Store) -> tuple[Pending, list[list[Any]]]:
    resolved: list[list[Any]] = []
    return Pending(store.call, resolved.append), resolved


async def test_an_operation_runs_at_once_when_the_store_answers() -> None:
    store = Store()
    pending, _ = _pending(store)
    await pending.run("release", "t1", 3)
    assert store.ran == [("release", ("t1", 3))] and len(pending) == 0


async def test_an_operation_the_store_refuses_waits_and_is_retried_in_order() -> None:
    store = Store()
    pending, _ = _pending(store)
    store.down = True
    await pending.run("release", "t1")  # never raises for the store's trouble
    store.down = False
    await pending.run("withdraw", "t2")  # the store is back, but t1 waits: t2 goes after it
    assert store.ran == [] and len(pending) == 2
    await pending.retry()
    assert store.ran == [("release", ("t1",)), ("withdraw", ("t2",))] and len(pending) == 0


async def test_a_retry_that_still_fails_raises_and_keeps_what_is_left() -> None:
    store = Store()
    pending, _ = _pending(store)
    pending.later("a", 1)
    pending.later("b", 2)
    store.down = True
    with pytest.raises(StoreUnavailable):
        await pending.retry()
    assert len(pending) == 2
    store.down = False
    await pending.retry()
    assert [op for op, _ in store.ran] == ["a", "b"]


async def test_what_a_step_dispatched_is_handed_on_and_other_replies_are_not() -> None:
    store = Store(reply=["ok", [["t9", "w1"]]])
    pending, resolved = _pending(store)
    await pending.run("release", "t1")
    assert resolved == [[["t9", "w1"]]]
    for reply in ("ok", ["ok"], ["ok", "not a list"], None):
        store.reply = reply
        await pending.run("release", "t1")
    assert len(resolved) == 1


async def test_an_operation_runs_to_its_end_when_its_caller_is_cancelled() -> None:
    store = Store()
    store.gate = asyncio.Event()
    pending, _ = _pending(store)
    caller = asyncio.ensure_future(pending.run("release", "t1"))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    store.gate.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert store.ran == [("release", ("t1",))]
