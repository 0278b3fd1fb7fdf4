"""Conversations to ids and back: the common prefix of two caches, text-only messages."""

from __future__ import annotations

import pytest

from omnivox.core.errors import UnsupportedContent
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.chat_codec import common_prefix, message_text


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0 and common_prefix([5], [6]) == 0


def test_text_parts_join_and_other_parts_are_refused() -> None:
    msg = ChatMessage(role="user", content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    assert message_text(msg) == message_text(ChatMessage(role="user", content=msg.canonical()))
    image = ChatMessage(role="user", content=[{"type": "image", "data": "AAAA"}])
    with pytest.raises(UnsupportedContent) as err:
        message_text(image)
    assert err.value.details["parts"] == ["image"]
