"""A response's function calls as the client hears them: each call an output item of its own, its
arguments streamed, and every call closed (completed, or incomplete when the response was cut)."""

from __future__ import annotations

from event_recorder import Recorder
from omnivox.protocol.realtime import events as ev
from omnivox.voice.llm.base import ToolCallDelta
from omnivox.worker.realtime.calls import ResponseCalls
from omnivox.worker.realtime.conversation import Conversation, Item


def make(conversation: Conversation | None = None, first_index: int = 0):
    events = Recorder()
    counter = iter(range(first_index, first_index + 100))
    calls = ResponseCalls("resp_1", events, conversation, lambda item: next(counter))
    return calls, events


def test_no_calls_is_falsy_and_finishing_says_nothing():
    calls, events = make()
    assert not calls
    calls.finish(True)
    assert events.sent == []


def test_one_call_streamed_and_completed():
    calls, events = make(first_index=1)
    calls.piece(ToolCallDelta(0, call_id="call_a", name="get_weather", arguments='{"city":'))
    calls.piece(ToolCallDelta(0, arguments=' "Paris"}'))
    assert calls
    calls.finish(True)
    assert events.types() == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]
    added, d1, d2, done, item_done = events.sent
    assert added.output_index == 1 and added.response_id == "resp_1"
    assert added.item["type"] == "function_call" and added.item["status"] == "in_progress"
    assert added.item["call_id"] == "call_a" and added.item["name"] == "get_weather"
    assert (d1.delta, d2.delta) == ('{"city":', ' "Paris"}') and d1.item_id == added.item["id"]
    assert done.arguments == '{"city": "Paris"}' and done.name == "get_weather" and done.call_id == "call_a"
    assert item_done.item["status"] == "completed" and item_done.item["arguments"] == '{"city": "Paris"}'


def test_a_cut_response_leaves_its_calls_incomplete():
    calls, events = make()
    calls.piece(ToolCallDelta(0, call_id="c", name="f", arguments="{"))
    calls.finish(False)
    assert events.sent[-1].item["status"] == "incomplete"
    assert isinstance(events.sent[-2], ev.FunctionCallArgumentsDone) and events.sent[-2].arguments == "{"


def test_parallel_calls_get_their_own_items_and_indexes():
    calls, events = make(first_index=3)
    calls.piece(ToolCallDelta(0, call_id="a", name="f"))
    calls.piece(ToolCallDelta(1, call_id="b", name="g", arguments="{}"))
    calls.piece(ToolCallDelta(0, arguments='{"x":1}'))
    calls.finish(True)
    added = [e for e in events.sent if isinstance(e, ev.OutputItemAdded)]
    assert [(a.item["call_id"], a.output_index) for a in added] == [("a", 3), ("b", 4)]
    done = {e.call_id: e for e in events.sent if isinstance(e, ev.FunctionCallArgumentsDone)}
    assert done["a"].arguments == '{"x":1}' and done["a"].output_index == 3
    assert done["b"].arguments == "{}" and done["b"].output_index == 4


def test_a_first_piece_without_an_id_or_name_gets_an_id_and_a_later_name():
    calls, events = make()
    calls.piece(ToolCallDelta(0))
    calls.piece(ToolCallDelta(0, name="late_name"))
    calls.finish(True)
    added = events.sent[0]
    assert added.item["call_id"].startswith("call_") and added.item["name"] == ""
    assert events.sent[-2].name == "late_name"
    assert not any(isinstance(e, ev.FunctionCallArgumentsDelta) for e in events.sent)  # no arguments


def test_a_name_once_given_is_kept():
    calls, events = make()
    calls.piece(ToolCallDelta(0, call_id="c", name="first"))
    calls.piece(ToolCallDelta(0, name="second"))
    calls.finish(True)
    assert events.sent[-2].name == "first"


def test_calls_join_the_conversation_and_announce_themselves_there():
    heard: list = []
    conversation = Conversation(emit=heard.append)
    conversation.add(Item(role="user", audio=False, text="weather?"))
    calls, _ = make(conversation)
    calls.piece(ToolCallDelta(0, call_id="c1", name="w", arguments="{}"))
    (item,) = [i for i in conversation if i.type == "function_call"]
    assert item.status == "in_progress" and conversation.call_named("c1") is item
    calls.finish(True)
    assert [e.type for e in heard] == ["conversation.item.added", "conversation.item.done"]
    assert heard[-1].item["status"] == "completed" and item.status == "completed"
    conversation.check_output("c1")  # a call that was made can be answered


def test_an_out_of_band_response_s_calls_join_nothing():
    calls, events = make(conversation=None)
    calls.piece(ToolCallDelta(0, call_id="c", name="f"))
    calls.finish(True)
    assert len(events.sent) == 3  # added, arguments done, item done
