"""A realtime session's events: unsent audio of a cancelled response is dropped; beta names on request."""

from __future__ import annotations

import asyncio
import json

from memsocket import MemorySocket
from omnivox.connection.runtime import Connection
from omnivox.protocol.realtime import events as ev
from omnivox.protocol.realtime.wire import REALTIME
from omnivox.worker.realtime.events import Events


async def test_outbox_drops_unsent_audio_of_a_cancelled_response_and_speaks_beta() -> None:
    socket = MemorySocket()
    socket.gate.clear()  # the client is slow: writes wait
    conn = Connection(socket, REALTIME)
    box = Events(conn, beta=True)
    running = asyncio.create_task(conn.run(lambda raw: asyncio.sleep(0)))
    box.put(ev.AudioDelta(response_id="r1", item_id="i", delta="AA"), response_id="r1", audio_ms=100)
    box.put(ev.AudioDelta(response_id="r1", item_id="i", delta="BB"), response_id="r1", audio_ms=100)
    box.put(ev.AudioDelta(response_id="r2", item_id="i", delta="CC"), response_id="r2", audio_ms=100)
    box.put(ev.Cleared())
    await socket.sending.wait()  # the first delta is being written
    assert box.drop_audio("r1") == 100.0
    socket.gate.set()
    sent = await socket.wait_sent(3)
    conn.end()
    await running
    events = [json.loads(s) for s in sent]
    assert [e["type"] for e in events] == [
        "response.audio.delta",
        "response.audio.delta",
        "input_audio_buffer.cleared",
    ]
    assert [e.get("delta") for e in events[:2]] == ["AA", "CC"]
    assert socket.closed_with == 1000


def test_ga_names_unless_the_client_asked_for_beta() -> None:
    delta = ev.AudioDelta(response_id="r", item_id="i", delta="AA")
    ga = Events(conn=None, beta=False)  # type: ignore[arg-type]
    beta = Events(conn=None, beta=True)  # type: ignore[arg-type]
    assert json.loads(ga.encode(delta))["type"] == "response.output_audio.delta"
    assert json.loads(beta.encode(delta))["type"] == "response.audio.delta"
    # events with no beta name keep theirs
    assert json.loads(beta.encode(ev.Cleared()))["type"] == "input_audio_buffer.cleared"
