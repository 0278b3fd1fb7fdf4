"""Control messages: typed, MessagePack, and anything else is a BadMessage (never pickle)."""

from __future__ import annotations

import pickle

import msgspec
import pytest

from omnivox.core.errors import BadPipelineMessage
from omnivox.pipeline.messages import (
    MAX_HEADER_BYTES,
    Abort,
    ArrayRef,
    Failed,
    Payload,
    Plan,
    Submit,
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
