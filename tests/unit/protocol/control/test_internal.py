"""Worker -> gateway frames: recognisable by their first bytes, parsed leniently."""

from __future__ import annotations

import json

import pytest

from omnivox.protocol.control import internal
from omnivox.protocol.control.internal import PREFIX, Metrics, TurnEndReport, is_internal, parse_internal
from omnivox.protocol.control.queue import QueueNotice, queue_message
from omnivox.protocol.realtime import events as ev


def test_internal_metrics_are_recognisable_without_parsing() -> None:
    assert internal.Metrics(response_done=True).model_dump_json().startswith(internal.PREFIX)
    assert (
        not ev.AudioDelta(response_id="r", item_id="i", delta="")
        .model_dump_json()
        .startswith(internal.PREFIX)
    )


@pytest.mark.parametrize(
    "frame",
    [
        Metrics(),
        Metrics(error_code="x", ttft_s=0.2, ttft_cache="hit"),
        TurnEndReport(),
        TurnEndReport(cached_hash="ab"),
    ],
    ids=repr,
)
def test_every_internal_frame_starts_with_the_prefix_and_round_trips(frame):
    raw = frame.model_dump_json()
    assert raw.startswith(PREFIX) and is_internal(raw)
    assert next(iter(json.loads(raw))) == "type"
    assert parse_internal(raw) == frame


def test_protocol_frames_are_not_internal():
    for frame in (
        ev.QueueStatus(status="queued", ticket_id="t").model_dump_json(),
        queue_message(QueueNotice("queued", "t")).model_dump_json(),
        '{"type": "omnivox.internal.metrics"}',  # spaced JSON is not what workers send
        '{"type":"omnivox.queue"}',
    ):
        assert not is_internal(frame)


def test_bytes_are_never_internal():
    assert not is_internal(Metrics().model_dump_json().encode())


def test_metrics_defaults():
    m = Metrics()
    assert (m.turn_done, m.interrupted, m.response_done) == (False, False, False)
    assert m.cache_hit is None and m.error_code is None and m.ttft_s is None
    assert (m.asr_busy_s, m.asr_audio_s, m.tts_busy_s, m.tts_audio_s) == (0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    "frame",
    [
        '{"type":"omnivox.internal.reboot","at":1}',  # a newer worker's frame
        '{"type":"omnivox.internal.metrics","ttft_cache":"warm"}',
        '{"type":"omnivox.internal.turn_end","cached_hash":7}',
        '{"type":"omnivox.internal.',
        "not json",
        "",
        "[]",
        '{"type":"chunk"}',
    ],
)
def test_what_the_gateway_does_not_know_parses_to_none(frame):
    assert parse_internal(frame) is None


def test_unknown_fields_of_known_frames_are_ignored():
    got = parse_internal('{"type":"omnivox.internal.turn_end","cached_hash":"h","future":1}')
    assert got == TurnEndReport(cached_hash="h")
