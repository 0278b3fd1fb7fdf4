"""How a WebRTC call carries a realtime session: formats fixed, audio on the track, playback events."""

from __future__ import annotations

import base64
import json

from omnivox.protocol.realtime.media import REALTIME_MEDIA as media


def test_the_call_fixes_the_formats_and_keeps_the_rest_of_the_session() -> None:
    (setup,) = media.preamble({"instructions": "hi", "audio": {"output": {"voice": "v"}}})
    session = json.loads(setup)["session"]
    assert session["instructions"] == "hi" and session["audio"]["output"]["voice"] == "v"
    assert (
        session["audio"]["input"]["format"]
        == session["audio"]["output"]["format"]
        == {
            "type": "audio/pcm",
            "rate": 24000,
        }
    )
    update = {
        "type": "session.update",
        "session": {
            "input_audio_format": "g711_ulaw",
            "audio": {"input": {"format": {"type": "audio/pcmu"}}},
        },
    }
    fixed = json.loads(media.client_frame(json.dumps(update)) or "")["session"]
    assert "input_audio_format" not in fixed and fixed["audio"]["input"]["format"]["type"] == "audio/pcm"
    assert media.client_frame("not json") == "not json"  # the worker says what is wrong with it
    appended = json.loads(media.audio_in(b"\x01\x00"))
    assert appended == {"type": "input_audio_buffer.append", "audio": base64.b64encode(b"\x01\x00").decode()}


def test_audio_goes_to_the_track_and_cuts_clear_it() -> None:
    delta = {"type": "response.output_audio.delta", "response_id": "r1", "item_id": "i", "delta": "AQA="}
    route = media.route(json.dumps(delta))
    assert (route.event, route.audio, route.response_id) == (None, b"\x01\x00", "r1")
    done = media.route(json.dumps({"type": "response.done", "response": {"id": "r1", "status": "cancelled"}}))
    assert done.event and done.clear and done.audio_over and done.response_id == "r1"
    completed = media.route(
        json.dumps({"type": "response.done", "response": {"id": "r2", "status": "completed"}})
    )
    assert completed.audio_over and not completed.clear
    assert media.route(json.dumps({"type": "conversation.item.truncated", "item_id": "i"})).clear
    cleared = media.route(json.dumps({"type": "output_audio_buffer.cleared", "response_id": "r1"}))
    assert cleared.clear and cleared.cleared_event
    paused = media.route(json.dumps({"type": "omnivox.interruption.paused", "response_id": "r1"}))
    assert paused.pause and paused.event and not paused.clear
    assert media.route(json.dumps({"type": "omnivox.interruption.resumed", "response_id": "r1"})).resume
    other = media.route('{"type": "session.created"}')
    assert other.event == '{"type": "session.created"}' and not other.clear
    assert json.loads(media.playback("stopped", "r1")) | {"event_id": ""} == {
        "type": "output_audio_buffer.stopped",
        "response_id": "r1",
        "event_id": "",
    }
