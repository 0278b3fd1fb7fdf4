"""The turn-based streaming protocol: its messages and how the gateway routes, ends and refuses turns."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from omnivox.core.errors import (
    InvalidMessage,
    OmnivoxError,
    PrefillRequired,
    QueueFull,
    UnknownMessageType,
)
from omnivox.protocol import streaming as sp
from omnivox.protocol.chat import ChatMessage, history_hash
from omnivox.protocol.control.queue import QueueNotice
from omnivox.protocol.spec import TurnRoute

S = sp.STREAMING


def prefill(*texts: str) -> sp.Prefill:
    roles = ["user", "assistant"]
    return sp.Prefill(messages=[{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)])


def test_description():
    assert (S.name, S.path, S.scope) == ("streaming", "/ws/streaming/{session_id}", "turn")
    assert S.task_type("anything", {"task": "realtime"}) == "streaming"
    assert S.session_id({"session_id": "conv-1"}, {"session_id": "other"}) == "conv-1"
    assert S.parser.tags == sp.CLIENT_TYPES


def test_server_types_include_error():
    assert sp.SERVER_TYPES == {"prefill_done", "chunk", "done", "error"}


def test_message_defaults():
    gen = sp.Generate()
    assert (gen.max_new_tokens, gen.temperature, gen.generate_audio, gen.voice) == (256, None, False, None)
    done = sp.Done(elapsed_ms=1.5)
    assert done.token_stats == sp.TokenStats() and done.stopped is False and done.text == ""
    assert sp.Done(elapsed_ms=1).token_stats is not done.token_stats
    assert (
        sp.PrefillDone(prompt_length=3, message_count=1, cached_tokens=0, input_tokens=3).cache_hit is False
    )


@pytest.mark.parametrize("temperature", [-0.1, 2.1])
def test_temperature_bounds(temperature):
    with pytest.raises(ValidationError):
        sp.Generate(temperature=temperature)
    assert sp.Generate(temperature=0.0).temperature == 0.0 and sp.Generate(temperature=2.0).temperature == 2.0


def test_server_messages_parse_as_clients_read_them():
    chunk = sp.SERVER_ADAPTER.validate_json('{"type":"chunk","chunk_index":2,"text_delta":"hi","new":1}')
    assert isinstance(chunk, sp.ReplyChunk) and chunk.chunk_index == 2 and chunk.is_final is False
    done = sp.SERVER_ADAPTER.validate_python(
        {"type": "done", "elapsed_ms": 3, "token_stats": {"input_tokens": 4}}
    )
    assert isinstance(done, sp.Done) and done.token_stats.input_tokens == 4


# ---- turn_start


def test_turn_start_hashes_the_history_before_the_last_message():
    three = prefill("hi", "hello", "how are you?")
    start = S.turn_start(three)
    assert isinstance(start, TurnRoute)
    assert start.history_hash == history_hash(three.messages[:2])


def test_same_history_same_hash_whatever_the_new_message():
    a = S.turn_start(prefill("hi", "hello", "one question"))
    b = S.turn_start(prefill("hi", "hello", "another question"))
    assert a == b and a.history_hash is not None


def test_different_history_different_hash():
    a = S.turn_start(prefill("hi", "hello", "q"))
    b = S.turn_start(prefill("hi", "hey", "q"))
    assert a.history_hash != b.history_hash


def test_the_new_message_continues_the_history_the_worker_cached():
    """What a worker caches after a turn is the next turn's routing key."""
    turn1 = prefill("hi")
    cached = history_hash([*turn1.messages, ChatMessage(role="assistant", content="hello")])
    assert S.turn_start(prefill("hi", "hello", "next")).history_hash == cached


def test_a_one_message_prefill_continues_nothing():
    assert S.turn_start(prefill("hi")) == TurnRoute(None)


@pytest.mark.parametrize("msg", [sp.Generate(), sp.Stop(), sp.Close()], ids=lambda m: m.type)
def test_only_a_prefill_starts_a_turn(msg):
    assert S.turn_start(msg) is None


def test_a_lone_surrogate_escape_is_refused_or_routed():
    raw = json.dumps(
        {
            "type": "prefill",
            "messages": [{"role": "user", "content": "\ud800"}, {"role": "user", "content": "x"}],
        }
    )
    try:
        msg = S.parser(raw, 10_000)
    except OmnivoxError:
        return
    assert S.turn_start(msg) is not None


# ---- ends_session, between_turns


def test_only_close_ends_the_session():
    assert S.ends_session(sp.Close()) is True
    assert not any(S.ends_session(m) for m in (prefill("hi"), sp.Generate(), sp.Stop()))


def test_generate_between_turns_needs_a_prefill():
    err = S.between_turns(sp.Generate())
    assert isinstance(err, PrefillRequired) and not err.fatal and err.code == "prefill_required"


@pytest.mark.parametrize("msg", [sp.Stop(), sp.Close(), prefill("hi")], ids=lambda m: m.type)
def test_other_messages_between_turns_are_not_errors(msg):
    assert S.between_turns(msg) is None


# ---- wording


def test_error_frame_is_the_error_payload():
    err = InvalidMessage("bad field", param="messages")
    frame = S.error_frame(err, event_id="ignored")
    assert (
        json.loads(frame)
        == err.to_payload()
        == {
            "type": "error",
            "code": "invalid_message",
            "message": "bad field",
            "details": {"param": "messages"},
        }
    )
    assert json.loads(S.error_frame(QueueFull("full"))) == {
        "type": "error",
        "code": "queue_full",
        "message": "full",
    }


def test_error_code_is_the_streaming_code():
    assert S.error_code(UnknownMessageType("x")) == "unknown_type"


def test_refusal_is_said_as_it_is():
    err = QueueFull("full")
    assert S.refusal(err) is err


@pytest.mark.parametrize("kind", ["queued", "queue_update", "queue_done"])
def test_notice_frames_use_the_demo_words(kind):
    notice = QueueNotice(
        kind, "t9", position=1, queue_length=2, estimated_wait_s=3.0, worker_id="w", waited_s=4.0
    )
    frame = json.loads(S.notice_frame(notice))
    assert frame["type"] == kind and frame["ticket_id"] == "t9"
    if kind == "queue_done":
        assert (frame["worker_id"], frame["waited_s"]) == ("w", 4.0) and "position" not in frame
    else:
        assert (frame["position"], frame["queue_length"], frame["estimated_wait_s"]) == (1, 2, 3.0)


def test_a_client_is_told_of_queue_done_even_when_it_never_waited():
    frame = S.notice_frame(QueueNotice("queue_done", "t1", worker_id="w", was_queued=False))
    assert frame is not None and json.loads(frame)["type"] == "queue_done"
