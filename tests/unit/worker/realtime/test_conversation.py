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


def test_function_calls_reach_a_tool_llm_paired_and_other_llms_in_words() -> None:
    from omnivox.core.errors import CallNotFound, InvalidMessage

    conv = Conversation()
    conv.add(Item("user", False, "weather and time?"))
    a, b = Item.call("c1", "weather", '{"city": "Paris"}'), Item.call("c2", "time", "{}")
    conv.add(a)
    conv.add(b)
    with pytest.raises(CallNotFound) as missing:
        conv.check_output("c9")
    assert missing.value.details["param"] == "item.call_id"
    conv.add(Item.call_output("c2", "noon"))
    # c1 has no output yet: a tool LLM does not see it (chat completions refuse a call left unanswered)
    assert [(m.role, m.tool_call_id) for m in conv.messages("", tools=True)] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c2"),
    ]
    conv.add(Item.call_output("c1", "sunny"))
    with pytest.raises(InvalidMessage):
        conv.check_output("c1")  # one output per call
    msgs = conv.messages("", tools=True)
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "tool"]
    assert [c.id for c in msgs[1].tool_calls or []] == ["c1", "c2"]  # parallel calls: one message
    assert [m.content for m in msgs[2:]] == ["sunny", "noon"]
    told = conv.messages("", tools=False)
    assert [m.role for m in told] == ["user", "assistant", "assistant", "user", "user"]
    assert "weather" in told[1].text() and "noon" in told[3].text()
    assert a.wire() == {
        "id": a.id,
        "object": "realtime.item",
        "type": "function_call",
        "status": "completed",
        "call_id": "c1",
        "name": "weather",
        "arguments": '{"city": "Paris"}',
    }
