"""Realtime protocol: event parsing with beta aliases, errors in the OpenAI shape, session updates."""

from __future__ import annotations

import json

import pytest

from omnivox.core.errors import ActiveResponse, InternalError, InvalidMessage, UnknownMessageType
from omnivox.protocol import realtime as rt
from omnivox.protocol.realtime_session import SessionConfig, apply_update
from omnivox.protocol.wire import parse


def p(obj: dict) -> object:
    return parse(
        rt.CLIENT_ADAPTER,
        json.dumps(obj),
        max_bytes=1 << 20,
        tags=rt.CLIENT_TYPES,
        aliases=rt.BETA_CLIENT_TYPES,
    )


def test_client_events_parse_and_beta_names_are_aliases() -> None:
    assert isinstance(p({"type": "input_audio_buffer.append", "audio": "AAAA"}), rt.InputAudioBufferAppend)
    beta = p({"type": "transcription_session.update", "session": {"turn_detection": None}})
    assert isinstance(beta, rt.SessionUpdate) and beta.session == {"turn_detection": None}
    item = p(
        {
            "type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        }
    )
    assert isinstance(item, rt.ConversationItemCreate) and item.item.content[0].text == "hi"
    with pytest.raises(UnknownMessageType) as unknown:
        p({"type": "response.explode", "event_id": "e9"})
    assert unknown.value.wire_code == "invalid_event" and unknown.value.details["event_id"] == "e9"
    with pytest.raises(InvalidMessage) as missing:
        p({"type": "conversation.item.truncate", "item_id": "x"})
    assert missing.value.details["param"] == "audio_end_ms"


def test_error_events_have_the_openai_shape() -> None:
    client_side = rt.error_event(ActiveResponse("busy"), "evt_1").model_dump(mode="json")
    assert client_side["type"] == "error" and client_side["event_id"].startswith("event_")
    assert client_side["error"] == {
        "type": "invalid_request_error",
        "code": "conversation_already_has_active_response",
        "message": "busy",
        "param": None,
        "event_id": "evt_1",
    }
    assert rt.error_event(InternalError("boom")).error.type == "server_error"


def test_internal_metrics_are_recognisable_without_parsing() -> None:
    assert rt.InternalMetrics(response_done=True).model_dump_json().startswith(rt.INTERNAL_PREFIX)
    assert (
        not rt.AudioDelta(response_id="r", item_id="i", delta="")
        .model_dump_json()
        .startswith(rt.INTERNAL_PREFIX)
    )


def test_session_update_is_a_partial_patch() -> None:
    base = SessionConfig(instructions="be kind")
    new = apply_update(
        base,
        {
            "type": "realtime",
            "audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 800}}},
        },
    )
    vad = new.audio.input.turn_detection
    assert vad is not None and vad.silence_duration_ms == 800 and vad.threshold == 0.5
    assert new.instructions == "be kind" and new.id == base.id  # untouched fields stay
    off = apply_update(new, {"audio": {"input": {"turn_detection": None, "transcription": None}}})
    assert off.audio.input.turn_detection is None and off.audio.input.transcription is None
    assert apply_update(off, {"id": "sess_forged"}).id == base.id  # read-only


def test_beta_flat_fields_land_in_their_ga_places() -> None:
    new = apply_update(
        SessionConfig(),
        {
            "modalities": ["text", "audio"],
            "voice": "heart",
            "input_audio_format": "g711_alaw",
            "output_audio_format": "pcm16",
            "turn_detection": {"type": "server_vad", "threshold": 0.7},
            "input_audio_transcription": {"model": "whisper-1"},
            "max_response_output_tokens": 99,
        },
    )
    assert new.output_modalities == ["audio"]
    assert new.audio.output.voice == "heart"
    assert (new.audio.input.format.type, new.audio.input.format.rate) == ("audio/pcma", 8000)
    assert (new.audio.output.format.type, new.audio.output.format.rate) == ("audio/pcm", 24000)
    assert new.audio.input.turn_detection.threshold == 0.7
    assert new.audio.input.transcription.model == "whisper-1" and new.max_output_tokens == 99


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        (
            {"audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 2}}}},
            "session.audio.input.turn_detection.threshold",
        ),
        (
            {"audio": {"output": {"format": {"type": "audio/pcm", "rate": 12345}}}},
            "session.audio.output.format",
        ),
        ({"audio": {"output": {"speed": 9}}}, "session.audio.output.speed"),
        ({"output_modalities": []}, "session.output_modalities"),
        ({"type": "transcription"}, "session.type"),
    ],
)
def test_bad_updates_name_the_field_and_change_nothing(patch, param) -> None:
    base = SessionConfig()
    with pytest.raises(InvalidMessage) as err:
        apply_update(base, patch)
    assert err.value.details["param"].startswith(param)
    assert base == SessionConfig(id=base.id)
