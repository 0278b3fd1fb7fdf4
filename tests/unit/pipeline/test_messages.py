"""Control messages: typed, MessagePack, and anything else is a BadMessage (never pickle)."""

from __future__ import annotations

import pickle

import msgspec
import pytest

from omnivox.core.errors import BadPipelineMessage, OmnivoxError
from omnivox.pipeline.messages import (
    CLIENT,
    MAX_HEADER_BYTES,
    Abort,
    ArrayRef,
    BadMessage,
    DataReady,
    Directory,
    Failed,
    Hello,
    Payload,
    Plan,
    Register,
    RegisterAck,
    RequestResult,
    Shutdown,
    StageInfo,
    StreamChunk,
    StreamDone,
    Submit,
    Welcome,
    decode,
    encode,
)


def test_messages_round_trip_with_their_type() -> None:
    plan = Plan({"a": ["client"]}, {"a": []}, {"a": []}, ["a"], ["a"])
    submit = Submit("r1", Payload({"text": "hi"}, {"x": ArrayRef("float32", (2,), 8, frame=0)}), plan)
    for message in (submit, Abort("r1"), Failed("r1", "stage_lost", "gone", "asr")):
        assert decode(encode(message)) == message


@pytest.mark.parametrize(
    "data",
    [
        b"not msgpack at all \xff\xff",
        msgspec.msgpack.encode({"type": "launch_missiles", "request_id": "x"}),
        msgspec.msgpack.encode({"type": "abort"}),  # a required field missing
        msgspec.msgpack.encode({"type": "abort", "request_id": 5}),  # a field of the wrong type
        pickle.dumps(Abort("r1")),
        b"",
    ],
)
def test_anything_else_is_a_bad_message(data: bytes) -> None:
    with pytest.raises(BadPipelineMessage):
        decode(data)


def test_an_oversized_header_is_refused_before_decoding() -> None:
    with pytest.raises(BadPipelineMessage):
        decode(b"\x00" * (MAX_HEADER_BYTES + 1))


PLAN = Plan(
    targets={"a": ["b"], "b": [CLIENT]},
    streams={"a": [], "b": [CLIENT]},
    inputs={"a": [], "b": ["a"]},
    entries=["a"],
    exits=["b"],
    client_host="h1",
)
INFO = StageInfo("asr", "tcp://127.0.0.1:5555", "host", 42, {"voices": ["x", "y"], "slots": 4})
PAYLOAD = Payload(
    {"text": "hello", "n": 3, "nested": {"k": [1, 2.5, None]}},
    {
        "audio": ArrayRef("float32", (2, 3), 24, frame=0),
        "big": ArrayRef("int16", (10,), 20, segment="ovx_1_0_0123abcd"),
    },
)

ALL = [
    Register(INFO, {"queue": 1.0, "slots_total": 4.0}, first=True),
    Register(INFO),
    RegisterAck("epoch-1", known=False),
    Directory("epoch-1", {"asr": INFO}),
    Hello("gateway", "host"),
    Hello("bare"),
    Welcome("epoch-2", {"asr": INFO}, "cascade"),
    Submit("r1"),
    Submit("r1", PAYLOAD, PLAN),
    Submit("r1", PAYLOAD, entries=["a"], exits=["b"]),
    DataReady("r1", "a", PLAN, PAYLOAD),
    StreamChunk("r1", "a", PAYLOAD, PLAN, seq=7),
    StreamChunk("r1", CLIENT, Payload()),
    StreamDone("r1", "a", PLAN, PAYLOAD),
    StreamDone("r1", CLIENT),
    Abort("r1"),
    Abort("r1", "client went away"),
    Shutdown(),
    Shutdown("bye"),
    RequestResult("r1", "b", PAYLOAD),
    RequestResult("r1", "", parts={"b": PAYLOAD, "c": Payload({"x": 1})}),
    Failed("r1", "stage_lost", "the stage died"),
]


@pytest.mark.parametrize("message", ALL, ids=lambda m: type(m).__name__)
def test_every_message_type_round_trips_equal_and_typed(message) -> None:
    data = encode(message)
    assert isinstance(data, bytes)
    back = decode(data)
    assert type(back) is type(message)
    assert back == message


def test_decode_accepts_a_memoryview_as_well_as_bytes() -> None:
    data = encode(Abort("r9", "why"))
    assert decode(memoryview(data)) == Abort("r9", "why")


def test_defaults_are_filled_in_when_omitted_on_the_wire() -> None:
    data = msgspec.msgpack.encode({"type": "submit", "request_id": "r"})
    message = decode(data)
    assert isinstance(message, Submit)
    assert message.payload == Payload() and message.plan is None
    assert message.entries == [] and message.exits == []


def test_array_shapes_come_back_as_tuples() -> None:
    message = decode(encode(Submit("r", PAYLOAD)))
    assert isinstance(message, Submit)
    assert message.payload.arrays["audio"].shape == (2, 3)
    assert message.payload.arrays["audio"].segment is None
    assert message.payload.arrays["big"].frame == -1


def test_the_type_tag_is_on_the_wire() -> None:
    raw = msgspec.msgpack.decode(encode(Failed("r", "x", "y")))
    assert raw["type"] == "error"
    raw = msgspec.msgpack.decode(encode(RegisterAck("e", True)))
    assert raw["type"] == "register_ack"


def test_messages_are_frozen() -> None:
    message = Abort("r1")
    with pytest.raises(AttributeError):
        message.request_id = "r2"  # type: ignore[misc]


@pytest.mark.parametrize(
    "raw",
    [
        {"request_id": "x"},  # no type tag at all
        {"type": "ABORT", "request_id": "x"},  # tags are case-sensitive
        {"type": "error", "request_id": "x", "code": "c"},  # message missing
        {"type": "register_ack", "epoch": "e", "known": "yes"},  # wrong type for a bool
        {"type": "submit", "request_id": "x", "payload": {"meta": "not a dict"}},
        {"type": "submit", "request_id": "x", "payload": {"arrays": {"a": {"dtype": "f"}}}},
        {"type": "stream_chunk", "request_id": "x", "source": "a", "payload": {}, "seq": "1"},
        {"type": "data_ready", "request_id": "x", "source": "a", "payload": {}},  # plan missing
        {"type": "directory", "epoch": "e", "stages": {"a": {"name": "a"}}},  # stage info incomplete
        {"type": "hello", "client": 5},
        {"type": "abort", "request_id": None},
    ],
)
def test_malformed_messages_are_bad_messages(raw: dict) -> None:
    with pytest.raises(BadPipelineMessage):
        decode(msgspec.msgpack.encode(raw))


@pytest.mark.parametrize(
    "data",
    [
        msgspec.msgpack.encode([1, 2, 3]),  # an array, not a map
        msgspec.msgpack.encode("abort"),
        msgspec.msgpack.encode(None),
        msgspec.msgpack.encode(12345),
        b'{"type": "abort", "request_id": "x"}',  # JSON is not MessagePack
        encode(Abort("r"))[:-2],  # truncated
    ],
)
def test_non_messages_are_bad_messages(data: bytes) -> None:
    with pytest.raises(BadPipelineMessage):
        decode(data)


def test_bad_message_is_data_an_omnivox_error_with_its_code() -> None:
    assert BadMessage is BadPipelineMessage
    with pytest.raises(OmnivoxError) as info:
        decode(b"\xc1")  # never used in MessagePack
    assert info.value.code == "bad_message"
    assert "malformed" in info.value.message


def test_a_header_at_the_limit_is_decoded_and_one_byte_over_is_not() -> None:
    base = encode(Abort("", "x"))
    filler = MAX_HEADER_BYTES - len(base)
    # grow the reason until the encoded message is exactly at the limit
    reason = "x" * (1 + filler)
    message = Abort("", reason)
    data = encode(message)
    while len(data) > MAX_HEADER_BYTES:
        reason = reason[: -(len(data) - MAX_HEADER_BYTES)]
        message = Abort("", reason)
        data = encode(message)
    assert len(data) <= MAX_HEADER_BYTES
    assert decode(data) == message
    too_big = encode(Abort("", reason + "y" * (MAX_HEADER_BYTES - len(data) + 1)))
    assert len(too_big) > MAX_HEADER_BYTES
    with pytest.raises(BadPipelineMessage) as info:
        decode(too_big)
    assert "limit" in info.value.message


def test_extra_unknown_fields_are_tolerated_not_fatal() -> None:
    # msgspec ignores unknown fields by default: a newer peer's extra field does not break an older one
    data = msgspec.msgpack.encode({"type": "abort", "request_id": "r", "future_field": 1})
    assert decode(data) == Abort("r")
