"""Frames to messages, with errors as data."""

from __future__ import annotations

import json

import pytest

from omnivox.core.errors import InvalidJson, InvalidMessage, MessageTooLarge, UnknownMessageType, WorkerLost
from omnivox.protocol import streaming as sp
from omnivox.protocol.chat import ChatMessage, history_hash
from omnivox.protocol.wire import parse


def p(obj, max_bytes=10_000):
    raw = obj if isinstance(obj, str) else json.dumps(obj)
    return parse(sp.CLIENT_ADAPTER, raw, max_bytes=max_bytes, tags=sp.CLIENT_TYPES)


def test_parses_each_client_message():
    msg = p({"type": "prefill", "messages": [{"role": "user", "content": "hi"}], "extra": 1})
    assert isinstance(msg, sp.Prefill) and msg.clear_kv_cache is True
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


def test_history_hash_is_canonical():
    a = [ChatMessage(role="user", content="hello")]
    b = [ChatMessage(role="user", content=[{"type": "text", "text": "hello"}])]
    assert history_hash(a) == history_hash(b)
    assert history_hash(a) != history_hash([ChatMessage(role="assistant", content="hello")])
    assert history_hash([]) is None


def test_worker_lost_is_recoverable_for_streaming():
    assert not WorkerLost("x").fatal and WorkerLost.code == "worker_lost"
