"""A call's sidebands: each hears the call's events and may send its own, until it or the call ends;
one that does not read never holds up the call or the others."""

from __future__ import annotations

import asyncio
import json

from memsocket import MemorySocket
from omnivox.gateway.edges.sidebands import _QUEUE, Sidebands
from omnivox.protocol.realtime.wire import REALTIME


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_a_sideband_hears_events_and_its_text_frames_are_delivered() -> None:
    bands, ended, delivered = Sidebands(), asyncio.Event(), []
    socket = MemorySocket()
    task = asyncio.create_task(bands.attach(socket, ended, delivered.append))
    await _settle()
    bands.publish('{"type": "a"}')
    socket.feed('{"type": "response.create"}', b"\x00binary is not an event")
    await _settle()
    assert socket.sent == ['{"type": "a"}']
    assert delivered == ['{"type": "response.create"}']
    socket.close_from_peer()  # the client went away
    await task
    assert socket.closed_with == 1000 and not bands._queues
    bands.publish("after")  # nobody left: nothing fails
    assert socket.sent == ['{"type": "a"}']


async def test_the_call_ending_closes_every_sideband() -> None:
    bands, ended = Sidebands(), asyncio.Event()
    sockets = [MemorySocket(), MemorySocket()]
    tasks = [asyncio.create_task(bands.attach(s, ended, lambda _: None)) for s in sockets]
    await _settle()
    bands.publish("e1")
    await _settle()
    bands.close()
    ended.set()
    await asyncio.gather(*tasks)
    assert [s.sent for s in sockets] == [["e1"], ["e1"]]
    assert [s.closed_with for s in sockets] == [1000, 1000] and not bands._queues


async def test_a_sideband_that_does_not_keep_up_misses_later_events_and_holds_nothing_up() -> None:
    bands, ended = Sidebands(), asyncio.Event()
    socket = MemorySocket()
    task = asyncio.create_task(bands.attach(socket, ended, lambda _: None))
    await _settle()
    for i in range(_QUEUE + 50):  # published without yielding: its sender cannot drain in between
        bands.publish(str(i))
    bands.close()  # its queue is full: the close marker is dropped too, the call's end still ends it
    await _settle()
    assert socket.sent == [str(i) for i in range(_QUEUE)]
    ended.set()
    await task
    assert socket.closed_with == 1000 and not bands._queues


async def test_each_sideband_is_sent_what_its_own_request_asked_for() -> None:
    """The call hears every event (it acts on omnivox's own); a sideband that did not ask for them
    (no ``?omnivox_events=true``) is not sent them, one that asked is."""
    bands, ended = Sidebands(), asyncio.Event()
    plain, asking = MemorySocket(), MemorySocket()
    tasks = [
        asyncio.create_task(bands.attach(plain, ended, lambda _: None, REALTIME.withheld({}))),
        asyncio.create_task(
            bands.attach(asking, ended, lambda _: None, REALTIME.withheld({"omnivox_events": "true"}))
        ),
    ]
    await _settle()
    paused = json.dumps({"type": "omnivox.interruption.paused", "response_id": "r1"}, separators=(",", ":"))
    done = json.dumps({"type": "response.done", "response": {"id": "r1"}})
    bands.publish(paused)
    bands.publish(done)
    await _settle()
    assert plain.sent == [done]
    assert asking.sent == [paused, done]
    ended.set()
    await asyncio.gather(*tasks)
