"""The outbox: order, drop by tag with its weight, back-pressure, drain."""

from __future__ import annotations

import asyncio

from omnivox.connection.outbox import Outbox


async def test_frames_come_out_in_order_and_drop_removes_a_tag_with_its_weight() -> None:
    box = Outbox()
    box.put("a")
    box.put("r1-1", tag="r1", weight=100)
    box.put("r2-1", tag="r2", weight=40)
    box.put("r1-2", tag="r1", weight=60.5)
    box.put("b")
    assert box.drop("r1") == 160.5
    assert box.drop("r1") == 0.0
    out = [(await box.get()).frame for _ in range(len(box))]
    assert out == ["a", "r2-1", "b"]


async def test_put_wait_waits_for_room_and_drain_for_the_writer() -> None:
    box = Outbox(limit=2)
    await box.put_wait("1")
    await box.put_wait("2")
    third = asyncio.create_task(box.put_wait("3"))
    await asyncio.sleep(0.01)
    assert not third.done()  # full: the producer waits
    assert (await box.get()).frame == "1"
    await asyncio.wait_for(third, 1)
    assert not await box.drain(0.01)  # two frames still unwritten
    for _ in range(2):
        await box.get()
        box.done()
    assert await box.drain(0.5)
    assert box.sent == 2


async def test_put_never_blocks_even_past_the_limit() -> None:
    box = Outbox(limit=1)
    for i in range(5):
        box.put(str(i))  # errors and control messages always get through
    assert len(box) == 5


async def test_drop_of_everything_leaves_it_drained() -> None:
    box = Outbox()
    box.put("x", tag="t", weight=1)
    assert box.drop("t") == 1
    assert await box.drain(0.1)


async def test_drain_waits_for_the_frame_being_written_too() -> None:
    box = Outbox()
    box.put("last words")
    await box.get()  # the emit task took it and is writing it
    assert not await box.drain(0.01)  # not written yet: a close now would lose it
    box.done()
    assert await box.drain(0.01)
