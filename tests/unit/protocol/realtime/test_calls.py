"""What WebRTC and phone calls share of a realtime session: fixed formats, appends, deltas."""

from __future__ import annotations

import base64
import json

import pytest

from omnivox.protocol.realtime import calls
from omnivox.protocol.realtime.media import REALTIME_MEDIA
from omnivox.protocol.realtime.phone import REALTIME_PHONE


def test_a_session_update_keeps_its_fields_but_not_its_formats() -> None:
    frame = json.dumps(
        {
            "type": "session.update",
            "session": {
                "instructions": "hi",
                "input_audio_format": "pcm16",
                "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}, "noise_reduction": None}},
            },
        }
    )
    phone = json.loads(REALTIME_PHONE.client_frame(frame, "audio/pcmu") or "")["session"]
    webrtc = json.loads(REALTIME_MEDIA.client_frame(frame) or "")["session"]
    assert phone["instructions"] == webrtc["instructions"] == "hi"
    assert "input_audio_format" not in phone and "input_audio_format" not in webrtc
    assert phone["audio"]["input"] == {"format": {"type": "audio/pcmu"}, "noise_reduction": None}
    assert phone["audio"]["output"]["format"] == {"type": "audio/pcmu"}
    assert webrtc["audio"]["output"]["format"] == {"type": "audio/pcm", "rate": 24000}


def test_other_frames_and_non_json_pass_as_they_are() -> None:
    deep = '{"type": "session.update", "session": ' + "[" * 100_000 + "]" * 100_000 + "}"
    for frame in ("not json", '{"type": "response.create"}', "[1, 2]", deep):
        # (a frame nested past the parser's depth too: the worker refuses it with its error)
        assert calls.with_fixed_formats(frame, {"type": "audio/pcma"}) == frame


def test_deltas_and_appends_carry_the_audio_and_bad_base64_is_nothing() -> None:
    assert json.loads(calls.append(b"\x01\x02"))["audio"] == base64.b64encode(b"\x01\x02").decode()
    assert calls.delta_audio({"delta": base64.b64encode(b"abc").decode()}) == b"abc"
    assert calls.delta_audio({"delta": "%%%"}) == b""
    assert calls.delta_audio({}) == b""
    route = REALTIME_PHONE.route(
        json.dumps({"type": "response.audio.delta", "delta": "%%", "response_id": "r"})
    )
    assert route.audio == b"" and route.response_id == "r"
    cleared = json.loads(calls.playback("cleared", "r1"))
    assert (cleared["type"], cleared["response_id"]) == ("output_audio_buffer.cleared", "r1")


def test_a_playback_report_is_a_client_event_the_session_parses() -> None:
    from omnivox.protocol.realtime import wire as rt

    for state in ("started", "stopped"):
        frame = calls.playback_report(state, "resp_1")
        assert frame is not None
        event = rt.REALTIME.parser(frame, 10_000)
        assert isinstance(event, rt.OutputAudioBufferReport)
        assert (event.response_id, event.state) == ("resp_1", state)
    assert calls.playback_report("cleared", "resp_1") is None
    assert REALTIME_PHONE.playback_report("stopped", "r") == calls.playback_report("stopped", "r")


def test_a_playback_report_without_a_response_or_with_another_state_is_refused() -> None:
    from omnivox.core.errors import OmnivoxError
    from omnivox.protocol.realtime import wire as rt

    for bad in (
        {"type": "omnivox.output_audio_buffer.report", "state": "started"},
        {"type": "omnivox.output_audio_buffer.report", "response_id": "r", "state": "paused"},
        {"type": "omnivox.output_audio_buffer.report", "response_id": "", "state": "stopped"},
    ):
        with pytest.raises(OmnivoxError):
            rt.REALTIME.parser(json.dumps(bad), 10_000)
