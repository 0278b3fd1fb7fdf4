"""The duplex protocol: its messages, config defaults and checks, task types, and wording."""

from __future__ import annotations

import json

import pytest

from omnivox.core.config import Settings
from omnivox.core.errors import InvalidMessage, PrepareRequired, QueueFull, UnknownMessageType
from omnivox.protocol import duplex as dp
from omnivox.protocol.control.queue import QueueNotice
from omnivox.protocol.registry import PROTOCOLS, by_name

D = dp.DUPLEX


def parse(msg: dict):
    return D.parser(json.dumps(msg), 1 << 20)


def test_it_is_registered_so_the_gateway_and_workers_mount_it() -> None:
    assert by_name("duplex") is D and D in PROTOCOLS
    assert D.scope == "session" and D.path == "/ws/duplex/{session_id}"


@pytest.mark.parametrize(
    ("session_id", "query", "task"),
    [
        ("abc", {}, "audio_duplex"),
        ("omni_abc", {}, "omni_duplex"),
        ("abc", {"mode": "omni"}, "omni_duplex"),
        ("omni_abc", {"mode": "audio"}, "audio_duplex"),
        ("abc", {"mode": "video"}, "audio_duplex"),
    ],
)
def test_task_type_from_the_id_or_the_mode(session_id, query, task) -> None:
    assert D.task_type(session_id, query) == task


def test_the_mode_reaches_the_worker() -> None:
    assert D.worker_params({}, {"mode": "omni"}) == {"mode": "omni"}
    assert D.worker_params({}, {"mode": "nonsense"}) == {}


def test_prepare_defaults_are_the_demo_s() -> None:
    msg = parse({"type": "prepare"})
    assert isinstance(msg, dp.Prepare) and msg.deferred_finalize is True and msg.record is None
    c = msg.config
    assert (c.generate_audio, c.chunk_ms, c.force_listen_count, c.max_new_speak_tokens_per_chunk) == (
        True,
        1000,
        3,
        20,
    )
    assert (c.temperature, c.top_p, c.top_k, c.listen_prob_scale, c.sample_rate) == (0.7, 0.8, 20, 1.0, 16000)
    assert c.max_kv_tokens is None and c.unknown == []


def test_unknown_config_keys_are_kept_aside_not_served() -> None:
    c = parse({"type": "prepare", "config": {"vad_threshold": 0.5, "chunk_ms": 500}}).config
    assert c.unknown == ["vad_threshold"] and c.chunk_ms == 500
    assert "vad_threshold" not in c.known() and c.known()["chunk_ms"] == 500


@pytest.mark.parametrize(
    ("config", "param"),
    [
        ({"chunk_ms": 50}, "config.chunk_ms"),
        ({"temperature": -1}, "config.temperature"),
        ({"top_p": 0}, "config.top_p"),
        ({"max_new_speak_tokens_per_chunk": 0}, "config.max_new_speak_tokens_per_chunk"),
        ({"sample_rate": 44000}, "config.sample_rate"),
        ({"generate_audio": "maybe"}, "config.generate_audio"),
        ({"max_kv_tokens": 10}, "config.max_kv_tokens"),
    ],
)
def test_a_bad_config_value_is_an_error_naming_the_field(config, param) -> None:
    with pytest.raises(InvalidMessage) as err:
        parse({"type": "prepare", "config": config})
    assert err.value.details["param"] == param


def test_audio_chunk_fields() -> None:
    msg = parse({"type": "audio_chunk", "audio_base64": "AAAA", "force_listen": True})
    assert isinstance(msg, dp.AudioChunk) and msg.format == "float32" and msg.force_listen
    assert msg.frame_base64_list is None
    with pytest.raises(InvalidMessage):
        parse({"type": "audio_chunk"})
    with pytest.raises(InvalidMessage):
        parse({"type": "audio_chunk", "audio_base64": "AAAA", "format": "opus"})
    with pytest.raises(InvalidMessage):
        parse({"type": "pause", "timeout": 0})


def test_every_client_type_parses_and_unknown_ones_do_not() -> None:
    for kind in ("pause", "resume", "stop", "client_diagnostic"):
        assert parse({"type": kind}).type == kind
    with pytest.raises(UnknownMessageType):
        parse({"type": "generate"})


def test_errors_and_queue_notices_in_the_demo_s_words() -> None:
    err = json.loads(D.error_frame(PrepareRequired("send prepare first")))
    assert err == {"type": "error", "code": "prepare_required", "message": "send prepare first"}
    queued = json.loads(D.notice_frame(QueueNotice("queued", "t1", 2, 3, 40.0)) or "")
    assert queued == {
        "type": "queued",
        "ticket_id": "t1",
        "position": 2,
        "queue_length": 3,
        "estimated_wait_s": 40.0,
    }
    done = json.loads(D.notice_frame(QueueNotice("queue_done", "t1", worker_id="w1", waited_s=1.5)) or "")
    assert done == {"type": "queue_done", "ticket_id": "t1", "worker_id": "w1", "waited_s": 1.5}
    assert D.refusal(QueueFull("full")).code == "queue_full"


def test_held_bytes_come_from_the_settings() -> None:
    assert D.held_bytes(Settings(duplex_queued_bytes=1234)) == 1234


def test_server_messages_round_trip() -> None:
    result = dp.Result(
        unit_index=0,
        is_listen=True,
        current_time=1.0,
        cost_prefill_ms=1,
        cost_generate_ms=2,
        cost_finalize_ms=0,
        wall_clock_ms=5,
        kv_cache_length=10,
    )
    back = dp.SERVER_ADAPTER.validate_json(result.model_dump_json())
    assert back == result and "result" in dp.SERVER_TYPES and "error" in dp.SERVER_TYPES
