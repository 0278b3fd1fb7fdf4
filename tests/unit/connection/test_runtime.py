"""The connection runtime: frames to the session, errors in the protocol's words, ends and closes."""

from __future__ import annotations

import asyncio
import json

import pytest

from memsocket import MemorySocket
from omnivox.connection.runtime import Connection
from omnivox.core.errors import (
    EngineFailure,
    InvalidMessage,
    OmnivoxError,
    QueueFull,
    WorkerLost,
)


class Words:
    """A protocol's wording: errors as ``{"type": "error", "code", "ref"}``."""

    def error_frame(self, err: OmnivoxError, event_id: str | None = None) -> str:
        return json.dumps({"type": "error", "code": err.code, "ref": event_id})

    def error_code(self, err: OmnivoxError) -> str:
        return err.code


def frames(socket: MemorySocket) -> list[dict]:
    return [json.loads(f) for f in socket.sent]


async def run(conn: Connection, on_frame, main=None) -> asyncio.Task[None]:
    task = asyncio.create_task(conn.run(on_frame, main))
    await asyncio.sleep(0)
    return task


async def test_frames_reach_the_session_in_order_and_replies_go_out_in_order() -> None:
    socket, seen = MemorySocket(), []
    conn = Connection(socket, Words())

    async def on_frame(raw: str | bytes) -> None:
        seen.append(raw)
        conn.send(f"echo:{raw}")

    task = await run(conn, on_frame)
    socket.feed("a", b"b", "c")
    await socket.wait_sent(3)
    assert seen == ["a", b"b", "c"]
    assert socket.sent == ["echo:a", "echo:b'b'", "echo:c"]
    socket.hang_up()
    await asyncio.wait_for(task, 1)
    assert conn.gone.is_set() and conn.close_code is None and socket.closed_with is None


async def test_a_recoverable_error_is_reported_with_its_reference_and_the_connection_goes_on() -> None:
    socket, codes = MemorySocket(), []
    conn = Connection(socket, Words(), on_error=codes.append)

    async def on_frame(raw: str | bytes) -> None:
        if raw == "bad":
            raise InvalidMessage("no", event_id="e1")
        conn.send("ok")

    task = await run(conn, on_frame)
    socket.feed("bad", "good")
    await socket.wait_sent(2)
    assert json.loads(socket.sent[0]) == {"type": "error", "code": "invalid_message", "ref": "e1"}
    assert socket.sent[1] == "ok" and codes == ["invalid_message"]
    assert not conn.ending
    conn.end()
    await asyncio.wait_for(task, 1)
    assert socket.closed_with == 1000


async def test_a_fatal_error_is_said_then_the_connection_closes_with_its_code() -> None:
    socket = MemorySocket()
    conn = Connection(socket, Words())

    async def on_frame(raw: str | bytes) -> None:
        raise QueueFull("full")

    task = await run(conn, on_frame)
    socket.feed("x")
    await asyncio.wait_for(task, 1)
    assert frames(socket) == [{"type": "error", "code": "queue_full", "ref": None}]
    assert socket.closed_with == 1008


async def test_an_unexpected_exception_is_a_server_fault_not_a_silent_close() -> None:
    socket = MemorySocket()
    conn = Connection(socket, Words())

    async def on_frame(raw: str | bytes) -> None:
        raise KeyError("bug")

    task = await run(conn, on_frame)
    socket.feed("x")
    await asyncio.wait_for(task, 1)
    assert frames(socket)[0]["code"] == "internal_error"
    assert socket.closed_with == 1011


async def test_keep_open_reports_a_fatal_kind_of_error_without_closing() -> None:
    socket = MemorySocket()
    conn = Connection(socket, Words())
    task = await run(conn, lambda raw: asyncio.sleep(0))
    conn.error(EngineFailure("the model failed this turn"), keep_open=True)
    await socket.wait_sent(1)
    assert not conn.ending
    conn.end(1000)
    await asyncio.wait_for(task, 1)
    assert socket.closed_with == 1000


async def test_main_returning_ends_the_connection_and_its_error_is_reported() -> None:
    socket = MemorySocket()
    conn = Connection(socket, Words())

    async def main() -> None:
        conn.send("hello")
        raise WorkerLost("gone")

    task = asyncio.create_task(conn.run(lambda raw: asyncio.sleep(0), main()))
    await asyncio.wait_for(task, 1)
    assert socket.sent[0] == "hello" and json.loads(socket.sent[1])["code"] == "worker_lost"
    assert socket.closed_with == 1011  # worker_lost closes with a server fault


async def test_main_that_ends_normally_closes_1000_after_its_last_words() -> None:
    socket = MemorySocket()
    socket.gate.clear()  # a slow client: the last words are still queued when main returns
    conn = Connection(socket, Words(), flush_timeout_s=2.0)

    async def main() -> None:
        conn.send("bye")

    task = asyncio.create_task(conn.run(lambda raw: asyncio.sleep(0), main()))
    await asyncio.sleep(0.01)
    assert not task.done()  # waiting to flush
    socket.gate.set()
    await asyncio.wait_for(task, 1)
    assert socket.sent == ["bye"] and socket.closed_with == 1000


async def test_a_peer_that_stops_reading_does_not_hold_the_close_forever() -> None:
    socket = MemorySocket()
    socket.gate.clear()  # never reads
    conn = Connection(socket, Words(), flush_timeout_s=0.05)
    task = await run(conn, lambda raw: asyncio.sleep(0))
    conn.send("never read")
    conn.end(1000)
    await asyncio.wait_for(task, 1)  # the flush gave up after its timeout
    assert socket.closed_with == 1000


async def test_the_first_end_decides_the_code() -> None:
    socket = MemorySocket()
    conn = Connection(socket, Words())
    task = await run(conn, lambda raw: asyncio.sleep(0))
    conn.end(1008)
    conn.end(1000)
    await asyncio.wait_for(task, 1)
    assert socket.closed_with == 1008


async def test_a_peer_that_goes_ends_everything_including_units() -> None:
    socket = MemorySocket()
    conn = Connection(socket, Words())
    stopped = asyncio.Event()

    async def unit() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()

    async def on_frame(raw: str | bytes) -> None:
        await conn.units.start("work", unit())

    task = await run(conn, on_frame)
    socket.feed("start")
    await asyncio.sleep(0.01)
    assert conn.units.running("work")
    socket.hang_up()
    await asyncio.wait_for(task, 1)
    assert stopped.is_set() and len(conn.units) == 0


async def test_a_failing_unit_is_reported_as_a_server_fault() -> None:
    socket = MemorySocket()
    conn = Connection(socket, Words())

    async def broken() -> None:
        raise RuntimeError("boom")

    async def on_frame(raw: str | bytes) -> None:
        await conn.units.start("work", broken())

    task = await run(conn, on_frame)
    socket.feed("go")
    await asyncio.wait_for(task, 1)
    assert frames(socket)[0]["code"] == "internal_error" and socket.closed_with == 1011


async def test_a_send_failure_means_the_peer_is_gone() -> None:
    socket = MemorySocket()
    socket.fail_sends = True
    conn = Connection(socket, Words())
    task = await run(conn, lambda raw: asyncio.sleep(0))
    conn.send("x")
    await asyncio.wait_for(task, 1)
    assert conn.gone.is_set() and conn.close_code is None


async def test_an_outside_cancellation_reaches_the_caller_and_stops_everything() -> None:
    socket = MemorySocket()
    conn = Connection(socket, Words())
    stopped = asyncio.Event()

    async def main() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()

    task = asyncio.create_task(conn.run(lambda raw: asyncio.sleep(0), main()))
    await asyncio.sleep(0.01)
    task.cancel("shutdown")
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stopped.is_set()


async def test_an_outside_cancellation_while_ending_is_not_swallowed() -> None:
    """The supervisor is ending the connection (flushing) when the server cancels it."""
    socket = MemorySocket()
    socket.gate.clear()
    conn = Connection(socket, Words(), flush_timeout_s=5.0)
    task = await run(conn, lambda raw: asyncio.sleep(0))
    conn.send("x")
    conn.end(1000)
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_peer_that_reads_nothing_for_too_long_is_disconnected_with_1008() -> None:
    socket = MemorySocket()
    socket.gate.clear()  # the peer stopped reading: every write blocks
    codes: list[str] = []
    conn = Connection(socket, Words(), on_error=codes.append, slow_peer_s=0.1, flush_timeout_s=0.05)
    task = await run(conn, lambda raw: asyncio.sleep(0))
    conn.send("a reply it will never read")
    await asyncio.wait_for(task, 2)
    assert conn.close_code == 1008 and codes == ["client_too_slow"]


async def test_unsent_bytes_past_the_limit_disconnect_the_peer_instead_of_piling_up() -> None:
    socket = MemorySocket()
    socket.gate.clear()
    conn = Connection(socket, Words(), outbox_limit_bytes=1000, flush_timeout_s=0.05)
    task = await run(conn, lambda raw: asyncio.sleep(0))
    for _ in range(20):
        conn.send("x" * 100)
    await asyncio.wait_for(task, 2)
    assert conn.close_code == 1008 and conn.outbox.bytes <= 1100


async def test_a_peer_that_reads_slowly_but_steadily_is_served() -> None:
    socket = MemorySocket()
    conn = Connection(socket, Words(), slow_peer_s=0.5, outbox_limit_bytes=10_000)
    task = await run(conn, lambda raw: asyncio.sleep(0))
    for i in range(20):
        conn.send(f"frame {i}")
        await asyncio.sleep(0.005)
    conn.end(1000)
    await asyncio.wait_for(task, 2)
    assert conn.close_code == 1000 and len(socket.sent) == 20
