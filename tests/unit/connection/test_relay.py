"""The relay: both directions in order, internal frames to control, holding, how it ended, taps."""

from __future__ import annotations

import asyncio

from memsocket import MemorySocket
from omnivox.connection.inbox import Inbox
from omnivox.connection.relay import Inbound, Relay
from omnivox.connection.taps import Direction, Frame
from omnivox.protocol.control.internal import Metrics, TurnEndReport


class Sink:
    def __init__(self) -> None:
        self.frames: list[str | bytes] = []
        self.got = asyncio.Event()

    async def send_wait(self, frame: str | bytes) -> None:
        self.frames.append(frame)
        self.got.set()

    async def wait_for(self, n: int) -> None:
        async with asyncio.timeout(2):
            while len(self.frames) < n:
                self.got.clear()
                await self.got.wait()


def inbound(*raws: str) -> list[Inbound]:
    return [Inbound(r) for r in raws]


async def test_frames_go_both_ways_in_order_and_taps_see_them_all() -> None:
    source: Inbox[Inbound] = Inbox()
    sink, worker, seen = Sink(), MemorySocket(), []
    relay = Relay(source, sink, worker, see=seen.append, clock=iter(range(100)).__next__)
    running = asyncio.create_task(relay.run())
    for item in inbound("c1", "c2", "c3"):
        await source.put(item, item.size)
    worker.feed("w1", b"w2")
    await worker.wait_sent(3)
    await sink.wait_for(2)
    assert worker.sent == ["c1", "c2", "c3"] and sink.frames == ["w1", b"w2"]
    worker.close_from_peer(1000)
    end = await asyncio.wait_for(running, 1)
    assert (end.side, end.worker_dropped, end.worker_code, end.held) == ("worker", False, 1000, False)
    up = [f.data for f in seen if f.direction is Direction.TO_WORKER]
    down = [f.data for f in seen if f.direction is Direction.TO_CLIENT]
    assert up == ["c1", "c2", "c3"] and down == ["w1", b"w2"]
    assert [f.at for f in seen] == sorted(f.at for f in seen)  # stamped in the order passed on


async def test_internal_frames_go_to_control_and_taps_never_to_the_client() -> None:
    source: Inbox[Inbound] = Inbox()
    sink, worker, seen, control = Sink(), MemorySocket(), [], []
    relay = Relay(source, sink, worker, see=seen.append, control=lambda f: control.append(f) is not None)
    running = asyncio.create_task(relay.run())
    metrics = Metrics(error_code="x").model_dump_json()
    worker.feed("a", metrics, "b")
    await sink.wait_for(2)
    assert sink.frames == ["a", "b"] and control == [metrics]
    assert [f.internal for f in seen] == [False, True, False]
    worker.close_from_peer()
    await asyncio.wait_for(running, 1)


async def test_a_worker_done_with_its_turn_is_held_and_the_next_message_waits_for_the_next_turn() -> None:
    source: Inbox[Inbound] = Inbox()
    sink, worker = Sink(), MemorySocket()
    relay = Relay(source, sink, worker, control=lambda f: "turn_end" in f)
    running = asyncio.create_task(relay.run())
    worker.feed(TurnEndReport(cached_hash="h").model_dump_json())
    await asyncio.sleep(0.01)
    next_turn = Inbound("next prefill")
    await source.put(next_turn, next_turn.size)  # the client speaks the moment the turn ends
    worker.feed("done")  # the worker's last message still reaches the client
    await sink.wait_for(1)
    worker.close_from_peer(1000)
    end = await asyncio.wait_for(running, 1)
    assert end.held and end.side == "worker" and not end.worker_dropped
    assert worker.sent == [] and sink.frames == ["done"]
    assert await source.get() == next_turn  # kept for the next turn's worker


async def test_a_held_worker_that_never_closes_does_not_hold_the_session() -> None:
    source: Inbox[Inbound] = Inbox()
    relay = Relay(source, Sink(), MemorySocket(), control=lambda f: True)
    relay.worker.feed(TurnEndReport().model_dump_json())  # type: ignore[attr-defined]
    end = await asyncio.wait_for(relay.run(hold_timeout_s=0.05), 1)
    assert end.held and end.side == "worker"


async def test_a_worker_that_vanishes_is_told_apart_from_one_that_closed() -> None:
    source: Inbox[Inbound] = Inbox()
    worker = MemorySocket()
    running = asyncio.create_task(Relay(source, Sink(), worker).run())
    worker.hang_up()
    end = await asyncio.wait_for(running, 1)
    assert end.side == "worker" and end.worker_dropped


async def test_a_failed_send_to_the_worker_ends_with_how_the_worker_went() -> None:
    source: Inbox[Inbound] = Inbox()
    worker = MemorySocket()
    worker.fail_sends = True
    running = asyncio.create_task(Relay(source, Sink(), worker).run(worker_close_timeout_s=1))
    item = Inbound("x")
    await source.put(item, item.size)
    await asyncio.sleep(0.01)
    worker.close_from_peer(1011)
    end = await asyncio.wait_for(running, 1)
    assert end.side == "worker" and end.worker_code == 1011


async def test_the_client_side_ending_ends_the_relay() -> None:
    source: Inbox[Inbound] = Inbox()
    running = asyncio.create_task(Relay(source, Sink(), MemorySocket()).run())
    source.close()
    end = await asyncio.wait_for(running, 1)
    assert end.side == "client"


async def test_cancelling_the_relay_stops_both_directions() -> None:
    source: Inbox[Inbound] = Inbox()
    running = asyncio.create_task(Relay(source, Sink(), MemorySocket()).run())
    await asyncio.sleep(0.01)
    running.cancel()
    try:
        await running
    except asyncio.CancelledError:
        pass
    assert running.cancelled()
    item = Inbound("after")
    source.offer(item, item.size)
    assert await source.get() == item  # nothing was consuming it any more


def test_frames_carry_direction_time_and_data() -> None:
    f = Frame(Direction.TO_CLIENT, 1.5, "x", internal=True)
    assert (f.direction.value, f.at, f.data, f.internal) == ("to_client", 1.5, "x", True)


async def test_frames_the_client_did_not_ask_for_are_withheld_from_it_and_seen_by_the_taps() -> None:
    source: Inbox[Inbound] = Inbox()
    sink, worker, seen = Sink(), MemorySocket(), []
    relay = Relay(source, sink, worker, see=seen.append, withheld=lambda f: f.startswith("ext"))
    running = asyncio.create_task(relay.run())
    worker.feed("a", "ext:paused", "b")
    await sink.wait_for(2)
    assert sink.frames == ["a", "b"]  # never the extension frame
    assert [f.data for f in seen] == ["a", "ext:paused", "b"]  # recording still sees it
    worker.close_from_peer()
    await asyncio.wait_for(running, 1)
