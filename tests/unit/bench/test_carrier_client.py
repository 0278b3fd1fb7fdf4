"""The benchmarks' carrier: what it sends is what the gateway's parser of that carrier reads (start,
media, dtmf, marks, stop), and what it is sent (media, markers, clear) it queues and echoes as the
carrier does. A stand-in socket (a mock: no server in a unit test) takes its frames."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest

from omnivox.audio.g711 import ulaw_encode
from omnivox.bench.carrier_client import FRAME, CarrierStream
from omnivox.telephony.carriers import CARRIERS
from omnivox.telephony.carriers.base import StreamDtmf, StreamMark, StreamMedia, StreamStart, StreamStop

CARRIER_NAMES = ("twilio", "telnyx", "plivo")


class FakeWs:
    def __init__(self, incoming: list[dict[str, Any]] | None = None) -> None:
        self.incoming = [json.dumps(m) for m in incoming or []]
        self.sent: list[str] = []

    async def send(self, frame: str) -> None:
        self.sent.append(frame)

    def __aiter__(self) -> FakeWs:
        return self

    async def __anext__(self) -> str:
        if not self.incoming:
            raise StopAsyncIteration
        return self.incoming.pop(0)


def _stream(carrier: str, incoming: list[dict[str, Any]] | None = None) -> tuple[CarrierStream, FakeWs]:
    stream = CarrierStream(carrier)
    stream.ws = FakeWs(incoming)
    return stream, stream.ws


@pytest.mark.parametrize("carrier", CARRIER_NAMES)
def test_its_start_is_read_by_the_gateway_as_this_calls_start(carrier) -> None:
    stream, _ = _stream(carrier)
    start = stream._start({"To": "+15550001", "From": "+15550002"})
    event = CARRIERS[carrier].parse(json.dumps(start))
    assert isinstance(event, StreamStart)
    assert event.stream_id == stream.stream_id and event.encoding == "audio/pcmu"
    if carrier == "telnyx":
        assert (event.callee, event.caller) == ("+15550001", "+15550002")


@pytest.mark.parametrize("carrier", CARRIER_NAMES)
async def test_its_media_dtmf_and_stop_are_read_as_such(carrier) -> None:
    stream, ws = _stream(carrier)
    payload = bytes(range(FRAME))
    media = CARRIERS[carrier].parse(json.dumps(stream._media(payload)))
    assert media == StreamMedia(payload)
    await stream.press("7")
    assert CARRIERS[carrier].parse(ws.sent[-1]) == StreamDtmf("7")
    await stream.stop()
    if carrier != "plivo":  # Plivo says no stop: its stream just closes
        assert isinstance(CARRIERS[carrier].parse(ws.sent[-1]), StreamStop)
    else:
        assert len(ws.sent) == 1


@pytest.mark.parametrize("carrier", CARRIER_NAMES)
async def test_its_marker_echo_is_read_as_played(carrier) -> None:
    stream, ws = _stream(carrier)
    await stream._echo("m1")
    assert CARRIERS[carrier].parse(ws.sent[-1]) == StreamMark("m1")


def test_sequence_numbers_and_media_chunks_count_up_from_one() -> None:
    stream, _ = _stream("twilio")
    first, second = stream._media(b"\xff" * FRAME), stream._media(b"\xff" * FRAME)
    assert (first["sequenceNumber"], second["sequenceNumber"]) == ("1", "2")
    assert (first["media"]["chunk"], second["media"]["chunk"]) == ("1", "2")
    assert (first["media"]["timestamp"], second["media"]["timestamp"]) == ("20", "40")


@pytest.mark.parametrize("carrier", CARRIER_NAMES)
async def test_what_the_gateway_sends_is_queued_and_a_clear_echoes_the_pending_marks(carrier) -> None:
    server = CARRIERS[carrier]
    sid = "S1"
    frames = [
        server.media(sid, b"\x01" * 320, "audio/pcmu"),
        server.mark(sid, "a"),
        server.media(sid, b"\x02" * 160, "audio/pcmu"),
        server.mark(sid, "b"),
    ]
    stream, ws = _stream(carrier, [json.loads(f) for f in frames])
    await stream._read()
    assert stream._queue == [("audio", b"\x01" * 320), ("mark", "a"), ("audio", b"\x02" * 160), ("mark", "b")]
    assert len(stream.media_at) == 2 and ws.sent == []
    ws.incoming = [server.clear(sid)]
    await stream._read()
    assert stream._queue == [] and stream.cleared_marks == ["a", "b"] and len(stream.clears) == 1
    assert [CARRIERS[carrier].parse(f) for f in ws.sent] == [StreamMark("a"), StreamMark("b")]
    assert stream.marked_at_clear == [0.0]


def test_first_sound_after_finds_the_first_loud_sample_played_after_a_time() -> None:
    stream, _ = _stream("twilio")
    quiet = ulaw_encode(np.zeros(FRAME, np.float32))
    loud = ulaw_encode(np.concatenate([np.zeros(40, np.float32), np.full(FRAME - 40, 0.5, np.float32)]))
    stream.played += quiet + loud + loud
    stream.play_log = [(10.0, 0), (10.02, FRAME), (10.04, 2 * FRAME)]
    assert stream.first_sound_after(9.0) == pytest.approx(10.02 + 40 / 8000)
    assert stream.first_sound_after(10.03) == pytest.approx(10.04 + 40 / 8000)  # the last frame
    assert stream.first_sound_after(11.0) is None
    assert len(stream.heard_audio()) == 3 * FRAME


def test_nothing_heard_is_empty_audio() -> None:
    stream, _ = _stream("plivo")
    assert stream.heard_audio().shape == (0,) and stream.first_sound_after(0.0) is None


def test_each_carrier_names_its_stream_and_call_as_it_does() -> None:
    assert CarrierStream("twilio").stream_id.startswith("MZ")
    assert CarrierStream("telnyx").call_sid.startswith("CA")
    base64.b64decode(CarrierStream("plivo")._media(b"\xff")["media"]["payload"])
