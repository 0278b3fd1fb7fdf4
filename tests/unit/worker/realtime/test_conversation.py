"""The conversation of a realtime session: order, truncation, and the item events it sends."""

from __future__ import annotations

import pytest

from omnivox.core.errors import ItemNotFound
from omnivox.worker.realtime.conversation import Conversation, Item


def test_conversation_orders_items_and_truncates_to_what_was_heard() -> None:
    conv = Conversation()
    a, b, c = Item("user", False, "one"), Item("assistant", True, "two"), Item("user", False, "three")
    assert conv.add(a) is None and conv.add(b) == a.id
    assert conv.add(c, previous_item_id="root") is None
    assert [i.id for i in conv] == [c.id, a.id, b.id]
    with pytest.raises(ItemNotFound):
        conv.add(Item("user", False, "x"), previous_item_id="item_missing")
    with pytest.raises(ItemNotFound):
        conv.add(Item("user", False, "dup", id=a.id))
    conv.delete(c.id)
    assert [m.content for m in conv.messages("sys")] == ["sys", "one", "two"]

    spoken = Item("assistant", True)
    spoken.spans = [(0.0, "Hello there."), (1000.0, "How are you doing today?")]
    spoken.audio_ms = 3000.0
    assert spoken.heard_text(500) == "Hello"
    assert spoken.heard_text(2000) == "Hello there. How are you"  # half of the second sentence
    spoken.truncate(1200)
    assert spoken.text == "Hello there. How" and spoken.audio_ms == 1200
    assert spoken.wire()["content"] == [{"type": "output_audio", "transcript": "Hello there. How"}]
