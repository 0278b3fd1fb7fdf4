"""Conversation content: message text, canonical forms and the history hash routing relies on."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from omnivox.protocol.chat import AudioPart, ChatMessage, ImagePart, TextPart, history_hash


def msg(role: str = "user", content: object = "hello") -> ChatMessage:
    return ChatMessage.model_validate({"role": role, "content": content})


def test_history_hash_is_canonical():
    a = [ChatMessage(role="user", content="hello")]
    b = [ChatMessage(role="user", content=[{"type": "text", "text": "hello"}])]
    assert history_hash(a) == history_hash(b)
    assert history_hash(a) != history_hash([ChatMessage(role="assistant", content="hello")])
    assert history_hash([]) is None


def test_text_of_a_string_and_of_mixed_parts():
    assert msg(content="plain").text() == "plain"
    mixed = msg(
        content=[
            {"type": "text", "text": "look"},
            {"type": "image", "data": "iVBORw0KGgo="},
            {"type": "audio", "data": "AAAA"},
            {"type": "text", "text": "here"},
        ]
    )
    assert mixed.text() == "look here"  # audio and image parts contribute nothing
    assert msg(content=[{"type": "audio", "data": "AAAA"}]).text() == ""
    assert msg(content=[]).text() == ""


def test_parts_are_typed_by_their_tag_and_take_defaults():
    m = msg(
        content=[
            {"type": "text", "text": "a"},
            {"type": "audio", "data": "AA"},
            {"type": "image", "data": "B"},
        ]
    )
    assert [type(p) for p in m.content] == [TextPart, AudioPart, ImagePart]
    audio = m.content[1]
    assert (audio.format, audio.sample_rate) == ("pcm16", 16000)


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "video", "data": "x"}],
        [{"type": "audio", "data": "x", "sample_rate": 4000}],
        [{"type": "audio", "data": "x", "sample_rate": 96000}],
        [{"type": "audio", "data": "x", "format": "mp3"}],
        [{"type": "text"}],
        42,
    ],
)
def test_bad_content_is_refused(content):
    with pytest.raises(ValidationError):
        msg(content=content)


def test_bad_role_is_refused():
    with pytest.raises(ValidationError):
        msg(role="developer")


def test_canonical_forms():
    assert msg(content="ab").canonical() == "ab"
    assert msg(content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]).canonical() == "ab"
    assert msg(content=[]).canonical() == ""  # no parts: only text parts, vacuously
    mixed = msg(
        content=[{"type": "text", "text": "a", "junk": 1}, {"type": "audio", "data": "AA"}]
    ).canonical()
    assert mixed == [
        {"type": "text", "text": "a"},
        {"type": "audio", "data": "AA", "format": "pcm16", "sample_rate": 16000},
    ]


def test_history_hash_ignores_key_order_extra_fields_and_defaults():
    plain = [{"role": "user", "content": [{"type": "audio", "data": "AA"}, {"type": "text", "text": "hi"}]}]
    shuffled = [
        {
            "extra": True,
            "content": [
                {"sample_rate": 16000, "data": "AA", "format": "pcm16", "type": "audio", "x": 1},
                {"text": "hi", "type": "text"},
            ],
            "role": "user",
        }
    ]
    a = [ChatMessage.model_validate(m) for m in plain]
    b = [ChatMessage.model_validate(m) for m in shuffled]
    assert history_hash(a) == history_hash(b)


def test_history_hash_tells_apart_what_the_model_would_see_differently():
    base = [msg("system", "be brief"), msg("user", "hi")]
    h = history_hash(base)
    assert h is not None and len(h) == 64 and int(h, 16) >= 0
    assert history_hash(list(reversed(base))) != h  # order matters
    assert history_hash([*base, msg("assistant", "hello")]) != h  # a longer history
    assert history_hash(base[:1]) != h  # a shorter one
    assert history_hash([msg("system", "be brief"), msg("assistant", "hi")]) != h  # roles matter
    audio_16k = [msg(content=[{"type": "audio", "data": "AA"}])]
    audio_8k = [msg(content=[{"type": "audio", "data": "AA", "sample_rate": 8000}])]
    assert history_hash(audio_16k) != history_hash(audio_8k)
    # the same text split between messages is a different conversation
    assert history_hash([msg(content="ab")]) != history_hash([msg(content="a"), msg(content="b")])


roles = st.sampled_from(["system", "user", "assistant"])
texts = st.text(max_size=20)
contents = st.one_of(texts, st.lists(texts.map(lambda t: {"type": "text", "text": t}), max_size=4))
messages = st.builds(lambda r, c: ChatMessage.model_validate({"role": r, "content": c}), roles, contents)


@settings(max_examples=150, deadline=None)
@given(st.lists(messages, max_size=5), st.lists(messages, max_size=5))
def test_history_hash_equal_exactly_when_canonical_forms_are(a, b):
    canon = [[(m.role, m.canonical()) for m in h] for h in (a, b)]
    assert (history_hash(a) == history_hash(b)) == (canon[0] == canon[1])
    assert (history_hash(a) is None) == (not a)


@settings(max_examples=100, deadline=None)
@given(roles, st.lists(texts, max_size=5))
def test_a_list_of_text_parts_hashes_as_its_joined_string(role, pieces):
    parts = msg(role, [{"type": "text", "text": t} for t in pieces])
    assert history_hash([parts]) == history_hash([msg(role, "".join(pieces))])
