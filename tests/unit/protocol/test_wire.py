"""Frames to messages, with errors as data."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter

from omnivox.core.errors import (
    InvalidJson,
    InvalidMessage,
    MessageTooLarge,
    OmnivoxError,
    UnknownMessageType,
)
from omnivox.protocol import streaming as sp
from omnivox.protocol.realtime import wire as rt
from omnivox.protocol.wire import Msg, frames, known_types, parse


def p(obj, max_bytes=10_000):
    raw = obj if isinstance(obj, str) else json.dumps(obj)
    return parse(sp.CLIENT_ADAPTER, raw, max_bytes=max_bytes, tags=sp.CLIENT_TYPES)


def test_parses_each_client_message():
    msg = p({"type": "prefill", "messages": [{"role": "user", "content": "hi"}], "extra": 1})
    assert isinstance(msg, sp.Prefill) and msg.is_last_chunk is True
    gen = p({"type": "generate", "max_new_tokens": 5})
    assert isinstance(gen, sp.Generate) and gen.max_new_tokens == 5 and gen.temperature is None
    assert isinstance(p({"type": "stop"}), sp.Stop)
    assert isinstance(p({"type": "close"}), sp.Close)
    parts = p({"type": "prefill", "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]})
    assert parts.messages[0].text() == "a"
    assert sp.CLIENT_TYPES == {"prefill", "generate", "stop", "close"}


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("{oops", InvalidJson),
        ('"a string"', InvalidMessage),
        ({"type": 3}, InvalidMessage),
        ({"type": "fly"}, UnknownMessageType),
        ({"type": "prefill", "messages": []}, InvalidMessage),
        ({"type": "generate", "max_new_tokens": 0}, InvalidMessage),
        ({"type": "generate", "temperature": 9}, InvalidMessage),
        ({"type": "prefill", "messages": [{"role": "user", "content": [{"type": "video"}]}]}, InvalidMessage),
    ],
)
def test_bad_frames(raw, error):
    with pytest.raises(error) as info:
        p(raw)
    payload = info.value.to_payload()
    assert payload["type"] == "error" and payload["code"] == error.code and payload["message"]
    assert not info.value.fatal


def test_size_limit():
    with pytest.raises(MessageTooLarge):
        p({"type": "stop", "pad": "x" * 2000}, max_bytes=1000)


# ---- the size limit


def test_size_limit_counts_utf8_bytes_not_characters():
    frame = json.dumps({"type": "stop", "pad": "é" * 40}, ensure_ascii=False)
    assert len(frame) < 100 < len(frame.encode())
    with pytest.raises(MessageTooLarge) as info:
        p(frame, max_bytes=100)
    assert info.value.details == {"limit": 100}
    assert str(len(frame.encode())) in info.value.message
    assert isinstance(p(frame, max_bytes=len(frame.encode())), sp.Stop)  # the limit itself is allowed


def test_size_limit_applies_to_bytes_frames_before_anything_else():
    raw = b"{not json at all" + b" " * 100
    with pytest.raises(MessageTooLarge):
        parse(sp.CLIENT_ADAPTER, raw, max_bytes=len(raw) - 1, tags=sp.CLIENT_TYPES)
    with pytest.raises(InvalidJson):
        parse(sp.CLIENT_ADAPTER, raw, max_bytes=len(raw), tags=sp.CLIENT_TYPES)


# ---- each error, its code, param and event_id


def test_bytes_frames_parse_and_bad_encodings_are_invalid_json():
    assert isinstance(
        parse(sp.CLIENT_ADAPTER, b'{"type": "stop"}', max_bytes=100, tags=sp.CLIENT_TYPES), sp.Stop
    )
    with pytest.raises(InvalidJson) as info:
        parse(sp.CLIENT_ADAPTER, b'{"type": "st\xffop"}', max_bytes=100, tags=sp.CLIENT_TYPES)
    assert info.value.code == "invalid_json" and info.value.wire_code == "invalid_event"
    assert "param" not in info.value.details


@pytest.mark.parametrize("raw", ["[]", "null", "3", '"prefill"', '[{"type": "stop"}]'])
def test_anything_but_an_object_is_an_invalid_message_without_a_param(raw):
    with pytest.raises(InvalidMessage) as info:
        p(raw)
    assert info.value.details == {}


@pytest.mark.parametrize("body", [{}, {"type": None}, {"type": 3}, {"type": ["stop"]}, {"type": {"a": 1}}])
def test_a_missing_or_non_string_type_names_the_type_param(body):
    with pytest.raises(InvalidMessage) as info:
        p({**body, "event_id": "e1"})
    assert info.value.details == {"param": "type", "event_id": "e1"}


def test_an_unknown_type_lists_the_known_ones():
    with pytest.raises(UnknownMessageType) as info:
        p({"type": "fly", "event_id": "e2"})
    err = info.value
    assert err.code == "unknown_type" and "'fly'" in err.message
    assert err.details == {
        "param": "type",
        "known": ["close", "generate", "prefill", "stop"],
        "event_id": "e2",
    }


def test_an_invalid_message_names_its_first_bad_field_and_every_problem():
    with pytest.raises(InvalidMessage) as info:
        p({"type": "generate", "max_new_tokens": 0, "temperature": 5, "event_id": "e3"})
    err = info.value
    assert err.details == {"param": "max_new_tokens", "event_id": "e3"}
    assert "max_new_tokens" in err.message and "temperature" in err.message and "'generate'" in err.message


def test_nested_fields_are_named_by_their_path():
    with pytest.raises(InvalidMessage) as info:
        p(
            {
                "type": "prefill",
                "messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}],
            }
        )
    assert info.value.details["param"] == "messages.1.role"
    with pytest.raises(InvalidMessage) as info:
        p({"type": "prefill"})
    assert info.value.details["param"] == "messages"


def test_a_bad_field_under_a_union_is_named_by_its_path():
    with pytest.raises(InvalidMessage) as info:
        p(
            {
                "type": "prefill",
                "messages": [{"role": "user", "content": [{"type": "audio", "data": "A", "sample_rate": 5}]}],
            }
        )
    assert info.value.details["param"] in {"messages.0.content", "messages.0.content.0.sample_rate"}


@pytest.mark.parametrize("event_id", [None, 7, ["e"], {"id": "e"}])
def test_only_a_string_event_id_is_carried(event_id):
    with pytest.raises(UnknownMessageType) as info:
        p({"type": "fly", "event_id": event_id})
    assert "event_id" not in info.value.details


def test_invalid_json_carries_no_event_id():
    with pytest.raises(InvalidJson) as info:
        p('{"type": "fly", "event_id": "e1"')
    assert "event_id" not in info.value.details


# ---- aliases and extra fields


def test_aliases_rename_a_type_before_it_is_checked():
    tags = rt.CLIENT_TYPES
    got = parse(
        rt.CLIENT_ADAPTER,
        '{"type": "transcription_session.update", "session": {}}',
        max_bytes=1000,
        tags=tags,
        aliases=rt.BETA_CLIENT_TYPES,
    )
    assert isinstance(got, rt.SessionUpdate) and got.type == "session.update"
    with pytest.raises(UnknownMessageType):  # without the aliases the old name is unknown
        parse(
            rt.CLIENT_ADAPTER,
            '{"type": "transcription_session.update", "session": {}}',
            max_bytes=1000,
            tags=tags,
        )
    with pytest.raises(InvalidMessage) as info:  # the alias's errors speak of the new name
        parse(
            rt.CLIENT_ADAPTER,
            '{"type": "transcription_session.update"}',
            max_bytes=1000,
            tags=tags,
            aliases=rt.BETA_CLIENT_TYPES,
        )
    assert "'session.update'" in info.value.message and info.value.details["param"] == "session"


def test_an_alias_to_a_type_outside_the_tags_is_unknown_under_its_new_name():
    with pytest.raises(UnknownMessageType) as info:
        parse(
            sp.CLIENT_ADAPTER,
            '{"type": "halt"}',
            max_bytes=100,
            tags=sp.CLIENT_TYPES,
            aliases={"halt": "pause"},
        )
    assert "'pause'" in info.value.message


def test_unknown_fields_are_ignored_at_every_level():
    msg = p(
        {
            "type": "prefill",
            "future": {"x": 1},
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "a", "lang": "en"}], "name": "n"}
            ],
        }
    )
    assert "future" not in msg.model_dump() and msg.messages[0].text() == "a"
    assert "name" not in msg.messages[0].model_dump()


# ---- Msg, known_types, frames


def test_dump_leaves_out_nones_and_is_json():
    chunk = sp.ReplyChunk(chunk_index=0, text_delta="hi")
    assert chunk.dump() == {"type": "chunk", "chunk_index": 0, "text_delta": "hi", "is_final": False}
    assert Msg.model_config["extra"] == "ignore"


def test_known_types_needs_a_union_discriminated_on_type():
    assert known_types(sp.SERVER_ADAPTER) == {"prefill_done", "chunk", "done"}

    class Plain(BaseModel):
        type: str

    with pytest.raises(ValueError):
        known_types(TypeAdapter(Plain))


class FakeSocket:
    def __init__(self, messages):
        self.messages = list(messages)

    async def receive(self):
        return self.messages.pop(0)


async def test_frames_yields_text_and_bytes_until_disconnect():
    ws = FakeSocket(
        [
            {"type": "websocket.receive", "text": "a"},
            {"type": "websocket.receive", "bytes": b"b"},
            {"type": "websocket.receive", "text": ""},
            {"type": "websocket.receive", "text": None, "bytes": None},
            {"type": "websocket.disconnect", "code": 1000},
            {"type": "websocket.receive", "text": "never read"},
        ]
    )
    assert [f async for f in frames(ws)] == ["a", b"b", "", b""]
    assert len(ws.messages) == 1


# ---- properties: parse answers anything with a message or an OmnivoxError


json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=10)
)
json_value = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
tags = st.sampled_from(sorted(sp.CLIENT_TYPES | rt.CLIENT_TYPES | {"nope", ""}))
fields = st.sampled_from(
    [
        "messages",
        "max_new_tokens",
        "temperature",
        "event_id",
        "session",
        "audio",
        "item",
        "item_id",
        "response",
    ]
)
objects = st.builds(lambda t, d: {"type": t, **d}, tags, st.dictionaries(fields, json_value, max_size=4))
frames_st = st.one_of(
    json_value.map(json.dumps),
    objects.map(json.dumps),
    objects.map(lambda o: json.dumps(o)[: len(json.dumps(o)) // 2]),
    st.text(max_size=60),
    st.binary(max_size=60),
    objects.map(lambda o: json.dumps(o, ensure_ascii=False).encode()),
)


@pytest.mark.parametrize(
    ("adapter", "tag_set", "aliases"),
    [(sp.CLIENT_ADAPTER, sp.CLIENT_TYPES, None), (rt.CLIENT_ADAPTER, rt.CLIENT_TYPES, rt.BETA_CLIENT_TYPES)],
    ids=["streaming", "realtime"],
)
@settings(max_examples=300, deadline=None)
@given(raw=frames_st)
def test_parse_returns_a_message_or_raises_a_recoverable_omnivox_error(adapter, tag_set, aliases, raw):
    try:
        msg = parse(adapter, raw, max_bytes=400, tags=tag_set, aliases=aliases)
    except OmnivoxError as err:
        assert not err.fatal and err.message
        event_id = err.details.get("event_id")
        if event_id is not None:
            assert json.loads(raw)["event_id"] == event_id
    else:
        assert msg.type in tag_set


def test_deeply_nested_json_under_the_size_limit_is_an_omnivox_error():
    raw = '{"type": "session.update", "session": ' + '{"a": ' * 3000 + "1" + "}" * 3000 + "}"
    with pytest.raises(OmnivoxError):
        parse(rt.CLIENT_ADAPTER, raw, max_bytes=1 << 20, tags=rt.CLIENT_TYPES)


def test_a_huge_integer_literal_is_an_omnivox_error():
    with pytest.raises(OmnivoxError):
        p('{"type": "generate", "max_new_tokens": ' + "9" * 5000 + "}", max_bytes=1 << 20)


def test_a_lone_surrogate_is_refused_and_named():
    raw = json.dumps({"type": "prefill", "messages": [{"role": "user", "content": "hi \ud800"}]})
    with pytest.raises(InvalidMessage) as info:
        p(raw)
    assert info.value.details["param"] == "messages.0.content" and "surrogate" in info.value.message


def test_a_lone_surrogate_in_a_key_is_refused_and_other_text_passes_whatever_its_script():
    raw = json.dumps({"type": "prefill", "messages": [{"role": "user", "content": "x", "\udc00k": 1}]})
    with pytest.raises(InvalidMessage, match="key holds a lone UTF-16 surrogate"):
        p(raw)
    text = "a" * 3000 + " café, 日本語"  # long, non-ASCII, no surrogate
    assert (
        p(json.dumps({"type": "prefill", "messages": [{"role": "user", "content": text}]}))
        .messages[0]
        .content
        == text
    )


def test_a_pair_of_surrogates_is_a_character_and_passes():
    raw = json.dumps({"type": "prefill", "messages": [{"role": "user", "content": "\U0001f600"}]})
    assert p(raw).messages[0].content == "\U0001f600"


def test_nesting_past_the_limit_is_refused():
    def nested(n: int) -> str:
        head = '{"type": "prefill", "messages": [{"role": "user", "content": "x", "x": '
        return head + "[" * n + "]" * n + "}]}"

    with pytest.raises(InvalidMessage, match="nested more than"):
        p(nested(70))
    assert p(nested(10)).type == "prefill"
