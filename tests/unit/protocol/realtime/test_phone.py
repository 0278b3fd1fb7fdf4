"""The realtime session over a phone call: what the call does with each session frame, and the
frames it makes (set-up, key presses, a greeting, a failed dial)."""

from __future__ import annotations

import json

from omnivox.core.errors import DialFailed
from omnivox.protocol.realtime.phone import END_CALL, PHONE_LINE, SEND_DTMF
from omnivox.protocol.realtime.phone import REALTIME_PHONE as phone


def test_the_preamble_fixes_g711_and_offers_end_call_once() -> None:
    mine = {"type": "function", "name": END_CALL, "description": "an old one", "parameters": {}}
    (frame,) = phone.preamble({"instructions": "hi", "tools": [mine]}, "audio/pcma", end_call=True)
    session = json.loads(frame)["session"]
    assert session["audio"]["input"]["format"] == {"type": "audio/pcma"}
    assert [t["name"] for t in session["tools"]] == [END_CALL]
    assert session["tools"][0]["description"] != "an old one"
    (plain,) = phone.preamble(None, "audio/pcmu", end_call=False)
    assert "tools" not in json.loads(plain)["session"]


def test_a_call_tells_its_session_it_is_on_a_phone_line_and_a_sideband_cannot_undo_it() -> None:
    # the judge of speech over a reply weighs what it does over G.711 (omnivox.line)
    (frame,) = phone.preamble({"omnivox": {"echo_guard": False}}, "audio/pcmu", end_call=False)
    assert json.loads(frame)["session"]["omnivox"] == {"echo_guard": False, "line": PHONE_LINE}
    (plain,) = phone.preamble(None, "audio/pcma", end_call=True)
    assert json.loads(plain)["session"]["omnivox"] == {"line": "phone"}
    update = {
        "type": "session.update",
        "session": {"omnivox": {"line": "wideband", "backchannel_max_ms": 900}},
    }
    session = json.loads(phone.client_frame(json.dumps(update), "audio/pcmu") or "")["session"]
    assert session["omnivox"] == {"line": "phone", "backchannel_max_ms": 900}
    # an update without options gets them (a sideband's update cannot leave the line unsaid)
    other = {"type": "session.update", "session": {"instructions": "hi"}}
    assert json.loads(phone.client_frame(json.dumps(other), "audio/pcmu") or "")["session"]["omnivox"] == {
        "line": "phone"
    }
    # options that are not an object go on as they are: the worker says what is wrong with them
    bad = {"type": "session.update", "session": {"omnivox": "phone"}}
    assert (
        json.loads(phone.client_frame(json.dumps(bad), "audio/pcmu") or "")["session"]["omnivox"] == "phone"
    )


def test_session_frames_become_call_actions() -> None:
    hang = phone.route(json.dumps({"type": "response.function_call_arguments.done", "name": END_CALL}))
    assert hang.hang_up and hang.event is not None
    other = phone.route(json.dumps({"type": "response.function_call_arguments.done", "name": "get_weather"}))
    assert not other.hang_up
    cut = phone.route(
        json.dumps({"type": "conversation.item.truncated", "item_id": "i1", "audio_end_ms": 640})
    )
    assert cut.clear and cut.truncated == ("i1", 640)
    assert phone.route(json.dumps({"type": "input_audio_buffer.speech_started"})).caller_spoke
    assert phone.route("not json").event == "not json"


def test_key_presses_greetings_and_failed_dials() -> None:
    frames, event = phone.dtmf("#")
    assert json.loads(frames[0])["item"]["content"][0]["text"] == "[DTMF #]"
    assert json.loads(event)["event"] == "#"
    assert json.loads(phone.greeting("Say hello"))["response"]["instructions"] == "Say hello"
    failed = json.loads(phone.failure(DialFailed("busy here", outcome="busy", sip_status=486)))
    assert failed["type"] == "error"
    assert (failed["error"]["code"], failed["error"]["outcome"], failed["error"]["sip_status"]) == (
        "dial_failed",
        "busy",
        486,
    )


def test_send_dtmf_is_offered_beside_end_call_and_its_calls_become_key_presses() -> None:
    (frame,) = phone.preamble(None, "audio/pcmu", end_call=True, send_dtmf=True)
    tools = json.loads(frame)["session"]["tools"]
    assert [t["name"] for t in tools] == [END_CALL, SEND_DTMF]
    assert tools[1]["parameters"]["required"] == ["digits"]
    done = {"type": "response.function_call_arguments.done", "name": SEND_DTMF, "call_id": "call_1"}
    press = phone.route(json.dumps({**done, "arguments": json.dumps({"digits": "2#"})}))
    assert press.keys == ("call_1", "2#") and press.event is not None and not press.hang_up
    # arguments that are not JSON, or name no digits, ask for no keys (the call answers with an error)
    for arguments in ["{not json", json.dumps({"digits": 5}), json.dumps(["1"]), "[" * 5000]:
        assert phone.route(json.dumps({**done, "arguments": arguments})).keys == ("call_1", "")


def test_a_tool_output_is_a_function_call_output_item_and_asks_for_no_response() -> None:
    event = json.loads(phone.tool_output("call_1", {"pressed": "2#"}))
    assert event["type"] == "conversation.item.create"
    assert event["item"] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": '{"pressed": "2#"}',
    }
