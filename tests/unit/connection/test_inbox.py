"""The inbox: order, byte budget, offers that do not fit, unget, close."""

from __future__ import annotations

import asyncio

import pytest

from omnivox.connection.inbox import Inbox


async def test_items_come_out_in_order_and_close_ends_after_draining() -> None:
    box: Inbox[str] = Inbox(100)
    await box.put("a", 1)
    await box.put("b", 1)
    box.close()
    assert [await box.get(), await box.get(), await box.get()] == ["a", "b", None]
    assert box.bytes == 0


async def test_put_waits_while_over_budget_until_a_get_makes_room() -> None:
    box: Inbox[str] = Inbox(10)
    await box.put("big", 11)  # one item may take it over the budget
    blocked = asyncio.create_task(box.put("next", 1))
    await asyncio.sleep(0.01)
    assert not blocked.done()  # over budget: the sender waits
    assert await box.get() == "big"
    await asyncio.wait_for(blocked, 1)
    assert await box.get() == "next"


async def test_offer_refuses_what_does_not_fit_a_budget() -> None:
    box: Inbox[str] = Inbox(1000)
    assert box.offer("a", 6, budget=10)
    assert not box.offer("b", 6, budget=10)  # 12 > 10: refused, nothing queued
    assert box.offer("c", 4, budget=10)
    assert len(box) == 2 and box.bytes == 10
    box.close()
    assert not box.offer("d", 0)


async def test_unget_puts_an_item_back_first() -> None:
    box: Inbox[str] = Inbox()
    await box.put("second", 2)
    first = await box.get()
    box.unget(first, 2)
    await box.put("third", 3)
    assert [await box.get(), await box.get()] == ["second", "third"]


async def test_a_waiting_get_is_woken_by_a_put_and_by_close() -> None:
    box: Inbox[str] = Inbox()
    getter = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    box.offer("x", 1)
    assert await asyncio.wait_for(getter, 1) == "x"
    getter = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    box.close()
    assert await asyncio.wait_for(getter, 1) is None


async def test_a_cancelled_get_loses_nothing() -> None:
    box: Inbox[str] = Inbox()
    getter = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    box.offer("kept", 1)
    assert await box.get() == "kept"
