"""The OpenAI Realtime protocol: client events (beta names as aliases) and how the gateway serves it."""

from __future__ import annotations

import json

import pytest

from omnivox.core.config import Settings
from omnivox.core.errors import (
    EngineFailure,
    InternalError,
    InvalidMessage,
    OmnivoxError,
    QueueFull,
    SessionLimitReached,
    TicketCancelled,
    Unauthorized,
    UnknownMessageType,
    WorkerBusy,
    WorkerLost,
    WorkerUnavailable,
)
from omnivox.protocol.control.queue import QueueNotice
from omnivox.protocol.realtime import wire as rt
from omnivox.protocol.wire import parse

R = rt.REALTIME


def p(obj: dict) -> object:
    return parse(
        rt.CLIENT_ADAPTER,
        json.dumps(obj),
        max_bytes=1 << 20,
        tags=rt.CLIENT_TYPES,
        aliases=rt.BETA_CLIENT_TYPES,
    )


def test_client_events_parse_and_beta_names_are_aliases() -> None:
    assert isinstance(p({"type": "input_audio_buffer.append", "audio": "AAAA"}), rt.InputAudioBufferAppend)
    beta = p({"type": "transcription_session.update", "session": {"turn_detection": None}})
    assert isinstance(beta, rt.SessionUpdate) and beta.session == {"turn_detection": None}
    item = p(
        {
            "type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        }
    )
    assert isinstance(item, rt.ConversationItemCreate) and item.item.content[0].text == "hi"
    with pytest.raises(UnknownMessageType) as unknown:
        p({"type": "response.explode", "event_id": "e9"})
    assert unknown.value.wire_code == "invalid_event" and unknown.value.details["event_id"] == "e9"
    with pytest.raises(InvalidMessage) as missing:
        p({"type": "conversation.item.truncate", "item_id": "x"})
    assert missing.value.details["param"] == "audio_end_ms"


# ---- client events


def test_the_client_event_names_are_the_ga_ones():
    # the GA names, and omnivox's one extension (a client's player reports its playback)
    assert rt.CLIENT_TYPES - {"omnivox.output_audio_buffer.report"} == {
        "session.update",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "input_audio_buffer.clear",
        "output_audio_buffer.clear",
        "conversation.item.create",
        "conversation.item.retrieve",
        "conversation.item.truncate",
        "conversation.item.delete",
        "response.create",
        "response.cancel",
    }
    assert set(rt.BETA_CLIENT_TYPES.values()) <= rt.CLIENT_TYPES
    assert not set(rt.BETA_CLIENT_TYPES) & rt.CLIENT_TYPES


@pytest.mark.parametrize(
    "event",
    [
        {"type": "input_audio_buffer.commit", "event_id": "e1"},
        {"type": "input_audio_buffer.clear"},
        {"type": "output_audio_buffer.clear"},
        {"type": "conversation.item.retrieve", "item_id": "i1"},
        {"type": "conversation.item.delete", "item_id": "i1"},
        {"type": "conversation.item.truncate", "item_id": "i1", "audio_end_ms": 0},
        {"type": "response.create"},
        {"type": "response.cancel", "response_id": "r1"},
    ],
    ids=lambda e: e["type"],
)
def test_each_client_event_parses_as_its_own_class(event):
    got = p(event)
    assert got.type == event["type"]
    assert got.event_id == event.get("event_id")


def test_response_create_takes_ga_and_beta_overrides():
    got = p(
        {
            "type": "response.create",
            "response": {
                "instructions": "shout",
                "output_modalities": ["text"],
                "modalities": ["audio", "text"],
                "max_output_tokens": "inf",
                "max_response_output_tokens": 5,
                "conversation": "none",
                "input": [{"role": "user", "content": [{"type": "input_text", "text": "x"}]}],
                "metadata": {"k": "v"},
                "unknown": True,
            },
        }
    )
    r = got.response
    assert (r.instructions, r.output_modalities, r.modalities) == ("shout", ["text"], ["audio", "text"])
    assert (r.max_output_tokens, r.max_response_output_tokens, r.conversation) == ("inf", 5, "none")
    assert r.input[0].type == "message" and r.input[0].content[0].text == "x"


@pytest.mark.parametrize(
    ("event", "param"),
    [
        ({"type": "conversation.item.truncate", "item_id": "i", "audio_end_ms": -1}, "audio_end_ms"),
        (
            {"type": "conversation.item.truncate", "item_id": "i", "audio_end_ms": 1, "content_index": -1},
            "content_index",
        ),
        ({"type": "input_audio_buffer.append"}, "audio"),
        ({"type": "session.update", "session": "fast"}, "session"),
        ({"type": "input_audio_buffer.commit", "event_id": "e" * 129}, "event_id"),
        ({"type": "conversation.item.create", "item": {"role": "tool"}}, "item.role"),
        ({"type": "conversation.item.create", "item": {"role": "user", "id": "x" * 65}}, "item.id"),
        (
            {"type": "conversation.item.create", "item": {"role": "user", "content": [{"type": "video"}]}},
            "item.content.0.type",
        ),
        (
            {
                "type": "conversation.item.create",
                "item": {"role": "user", "content": [{"type": "input_text"}] * 65},
            },
            "item.content",
        ),
        (
            {"type": "response.create", "response": {"output_modalities": ["video"]}},
            "response.output_modalities.0",
        ),
    ],
)
def test_bad_client_events_name_the_field(event, param):
    with pytest.raises(InvalidMessage) as info:
        p(event)
    assert info.value.details["param"] == param and info.value.wire_code == "invalid_event"


def test_the_event_id_of_a_bad_event_is_carried_into_the_error():
    with pytest.raises(InvalidMessage) as info:
        p({"type": "input_audio_buffer.append", "event_id": "e7"})
    assert info.value.details == {"param": "audio", "event_id": "e7"}


# ---- the protocol


def test_description():
    assert (R.name, R.path, R.scope) == ("realtime", "/v1/realtime", "session")
    assert R.worker_paths[-1] == "/ws/realtime/{session_id}"
    assert R.task_type("s", {}) == "realtime"
    assert R.parser.aliases == rt.BETA_CLIENT_TYPES and R.parser.tags == rt.CLIENT_TYPES


def test_session_id_comes_from_the_query():
    assert R.session_id({"session_id": "from-path"}, {"session_id": "q1"}) == "q1"
    assert R.session_id({"session_id": "from-path"}, {}) is None


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        (["openai-insecure-api-key.sk-x", "realtime", "openai-beta.realtime-v1"], "realtime"),
        (["realtime"], "realtime"),
        (["openai-beta.realtime-v1", "other"], "openai-beta.realtime-v1"),
        ([], None),
    ],
)
def test_subprotocol_prefers_realtime_else_the_first_offered(offered, chosen):
    assert R.subprotocol(offered) == chosen


@pytest.mark.parametrize(
    ("headers", "params"),
    [
        ({"openai-beta": "realtime=v1"}, {"beta": "1"}),
        ({"openai-beta": "assistants=v2, realtime=v1"}, {"beta": "1"}),
        ({"openai-beta": "assistants=v2"}, {}),
        ({}, {}),
    ],
)
def test_worker_params_carry_the_beta_flag(headers, params):
    assert R.worker_params(headers, {"beta": "1"}) == params


def test_the_beta_flag_reaches_the_worker_url():
    url = R.worker_url("http://w:1", "s 1", R.worker_params({"openai-beta": "realtime=v1"}, {}))
    assert url == "ws://w:1/ws/realtime/s%201?beta=1"


def test_queue_limits_come_from_the_settings():
    s = Settings(realtime_max_wait_s=4.5, realtime_queued_bytes=1234)
    assert R.max_wait_s(s) == 4.5 and R.held_bytes(s) == 1234
    defaults = Settings()
    assert R.max_wait_s(defaults) == defaults.realtime_max_wait_s
    assert R.held_bytes(defaults) == defaults.realtime_queued_bytes


@pytest.mark.parametrize(
    "err", [InvalidMessage("x"), UnknownMessageType("x"), QueueFull("x"), InternalError("x")], ids=repr
)
def test_error_code_is_the_wire_code(err):
    assert R.error_code(err) == err.wire_code


def test_error_frame_is_an_openai_error_event():
    frame = json.loads(R.error_frame(InvalidMessage("bad", param="session.voice"), "evt_3"))
    assert frame["type"] == "error" and frame["event_id"].startswith("event_")
    assert frame["error"] == {
        "type": "invalid_request_error",
        "code": "invalid_event",
        "message": "bad",
        "param": "session.voice",
        "event_id": "evt_3",
    }


# ---- queue notices


def test_no_queue_is_mentioned_when_a_worker_was_free_at_once():
    assert R.notice_frame(QueueNotice("queue_done", "t1", worker_id="w1", was_queued=False)) is None


@pytest.mark.parametrize(
    ("kind", "status"), [("queued", "queued"), ("queue_update", "queued"), ("queue_done", "assigned")]
)
def test_notices_are_omnivox_queue_events(kind, status):
    notice = QueueNotice(kind, "t1", position=2, queue_length=3, estimated_wait_s=1.5, worker_id="w1")
    frame = json.loads(R.notice_frame(notice))
    assert frame.pop("event_id").startswith("event_")
    assert frame == {
        "type": "omnivox.queue",
        "status": status,
        "ticket_id": "t1",
        "position": 2,
        "queue_length": 3,
        "estimated_wait_s": 1.5,
    }


# ---- refusals


@pytest.mark.parametrize(
    "err", [QueueFull("queue is full"), TicketCancelled("cancelled by the admin")], ids=repr
)
def test_capacity_refusals_become_session_limit_reached(err):
    said = R.refusal(err)
    assert isinstance(said, SessionLimitReached) and said.close_code == 1008 and said.fatal
    assert said.message == f"the server is at capacity: {err.message}"
    assert R.error_code(said) == "session_limit_reached"


@pytest.mark.parametrize(
    "err",
    [
        Unauthorized("no key"),
        WorkerUnavailable("none can"),
        WorkerBusy("busy"),
        SessionLimitReached("waited"),
    ],
    ids=repr,
)
def test_policy_refusals_are_kept(err):
    assert R.refusal(err) is err


@pytest.mark.parametrize(
    "err", [InternalError("boom"), WorkerLost("gone"), EngineFailure("x"), InvalidMessage("x")], ids=repr
)
def test_other_refusals_become_session_limit_reached_with_their_message(err):
    said = R.refusal(err)
    assert isinstance(said, SessionLimitReached) and said.message == err.message


def test_every_refusal_closes_with_policy():
    for err in (
        QueueFull("a"),
        TicketCancelled("b"),
        InternalError("c"),
        Unauthorized("d"),
        OmnivoxError("e"),
    ):
        assert R.refusal(err).close_code == 1008
