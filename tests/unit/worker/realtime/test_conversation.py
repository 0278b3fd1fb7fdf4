"""The conversation of a realtime session: order, truncation, and the item events it sends."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.agent.playout import Playback
from omnivox.core.errors import (
    DeleteItemNotFound,
    InvalidMessage,
    ItemExists,
    ItemNotFound,
    RetrieveItemNotFound,
    TruncateItemNotFound,
)
from omnivox.worker.realtime.conversation import KEEP_IMAGES, Conversation, Item


def said(*sentences: tuple[float, str], audio_ms: float) -> Playback:
    """A reply's playback that spoke ``sentences`` (each from its start, in ms) over ``audio_ms``."""
    playback = Playback(lambda: 0.0)
    ends = [start for start, _ in sentences[1:]] + [audio_ms]
    for (start, text), end in zip(sentences, ends, strict=False):
        assert playback.sent_ms == start
        playback.sentence(text)
        playback.send(np.zeros(round((end - start) * 16), np.float32), 16000)
    if not sentences:
        playback.send(np.zeros(round(audio_ms * 16), np.float32), 16000)
    return playback


def test_conversation_orders_items_and_truncates_to_what_was_heard() -> None:
    conv = Conversation()
    a, b, c = Item("user", False, "one"), Item("assistant", True, "two"), Item("user", False, "three")
    assert conv.add(a) is None and conv.add(b) == a.id
    assert conv.add(c, previous_item_id="root") is None
    assert [i.id for i in conv] == [c.id, a.id, b.id]
    with pytest.raises(ItemNotFound):
        conv.add(Item("user", False, "x"), previous_item_id="item_missing")
    with pytest.raises(ItemExists):
        conv.add(Item("user", False, "dup", id=a.id))
    conv.delete(c.id)
    assert [m.content for m in conv.messages("sys")] == ["sys", "one", "two"]

    playback = said((0.0, "Hello there."), (1000.0, "How are you doing today?"), audio_ms=3000.0)
    spoken = Item("assistant", True, playback=playback)
    assert spoken.audio_ms == 3000.0
    assert playback.heard_text(500) == "Hello"
    assert playback.heard_text(2000) == "Hello there. How are you"  # half of the second sentence
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


@pytest.mark.parametrize(
    ("op", "error", "wire"),
    [
        (lambda c: c.retrieve("nope"), RetrieveItemNotFound, "item_retrieve_invalid_item_id"),
        (lambda c: c.delete("nope"), DeleteItemNotFound, "item_delete_invalid_item_id"),
        (lambda c: c.check_truncation("nope", 0), TruncateItemNotFound, "item_truncate_invalid_item_id"),
    ],
)
def test_a_missing_item_is_named_by_what_the_client_tried_as_openai_names_it(op, error, wire) -> None:
    with pytest.raises(error) as raised:
        op(Conversation())
    assert isinstance(raised.value, ItemNotFound) and raised.value.wire_code == wire
    assert raised.value.details["param"] == "item_id"


def test_a_reply_still_being_sent_is_cut_anywhere_up_to_what_was_sent() -> None:
    conv = Conversation()
    playing = Item("assistant", True, status="in_progress", playback=said(audio_ms=1500.0))
    conv.add(playing)
    assert conv.check_truncation(playing.id, 0) == (playing, 0.0)
    assert conv.check_truncation(playing.id, 1000) == (playing, 1000.0)
    # the client's clock ran ahead of what was sent: cut at what was sent
    assert conv.check_truncation(playing.id, 9000) == (playing, 1500.0)


def test_a_finished_reply_is_cut_within_a_little_of_its_end_and_no_further() -> None:
    conv = Conversation()
    done = Item("assistant", True, status="completed", playback=said(audio_ms=1500.0))
    conv.add(done)
    assert conv.check_truncation(done.id, 1700) == (done, 1500.0)
    with pytest.raises(InvalidMessage) as past:
        conv.check_truncation(done.id, 2500)
    assert past.value.details["param"] == "audio_end_ms"
    typed = Item("assistant", False, "text only")
    conv.add(typed)
    with pytest.raises(InvalidMessage):
        conv.check_truncation(typed.id, 0)


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def test_images_reach_an_llm_that_sees_and_only_the_last_few_are_kept():
    conversation = Conversation()
    for n in range(KEEP_IMAGES + 1):
        conversation.create(Item("user", False, text=f"look {n}", images=[PNG]), None)
    blind = conversation.messages("")
    assert [m.content for m in blind] == [f"look {n}" for n in range(KEEP_IMAGES + 1)]
    seeing = conversation.messages("", vision=True)
    assert seeing[0].content == "look 0"  # the oldest image was let go
    last = seeing[-1].content
    assert isinstance(last, list) and [p.type for p in last] == ["text", "image"] and last[1].data == PNG
    only_image = Item("user", False, images=[PNG])
    conversation.create(only_image, None)
    assert conversation.messages("", vision=True)[-1].content[0].type == "image"
    assert len(conversation.messages("")) == KEEP_IMAGES + 1  # a blind LLM is not given an empty one
