"""Realtime session configuration: session.update as a partial patch, GA and beta forms, audio formats."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from omnivox.core.errors import InvalidMessage
from omnivox.protocol.realtime.session_config import (
    BETA_FORMATS,
    PCM_RATES,
    AudioFormat,
    SessionConfig,
    TurnDetection,
    apply_update,
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
        ({"type": "translation"}, "session.type"),
    ],
)
def test_bad_updates_name_the_field_and_change_nothing(patch, param) -> None:
    base = SessionConfig()
    with pytest.raises(InvalidMessage) as err:
        apply_update(base, patch)
    assert err.value.details["param"].startswith(param)
    assert base == SessionConfig(id=base.id)


# ---- the effective configuration


def test_defaults_in_the_ga_wire_form():
    wire = SessionConfig().wire()
    assert wire["id"].startswith("sess_") and SessionConfig().id != SessionConfig().id
    assert {k: wire[k] for k in ("type", "object", "model", "instructions", "output_modalities")} == {
        "type": "realtime",
        "object": "realtime.session",
        "model": "omnivox",
        "instructions": "",
        "output_modalities": ["audio"],
    }
    assert (wire["max_output_tokens"], wire["tools"], wire["tool_choice"]) == ("inf", [], "auto")
    assert wire["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert wire["audio"]["output"] == {
        "format": {"type": "audio/pcm", "rate": 24000},
        "voice": "default",
        "speed": 1.0,
    }
    assert wire["audio"]["input"]["turn_detection"]["type"] == "server_vad"
    assert wire["audio"]["input"]["transcription"]["model"] == "default"
    assert SessionConfig.model_validate(wire) == SessionConfig(id=wire["id"])  # the wire form reads back


def test_audio_out_follows_the_output_modalities():
    assert SessionConfig().audio_out is True
    assert SessionConfig(output_modalities=["text"]).audio_out is False


# ---- audio formats


@pytest.mark.parametrize(
    ("kind", "rate"), [("audio/pcmu", 8000), ("audio/pcma", 8000), ("audio/opus", 24000)]
)
def test_g711_and_opus_rates_are_fixed(kind, rate):
    for asked in (8000, 16000, 24000, 12345):
        assert AudioFormat(type=kind, rate=asked).rate == rate
    assert AudioFormat(type=kind).rate == rate


@pytest.mark.parametrize("rate", PCM_RATES)
def test_pcm_takes_the_listed_rates(rate):
    assert AudioFormat(type="audio/pcm", rate=rate).rate == rate


@pytest.mark.parametrize("rate", [0, 7999, 12345, 96000, -24000])
def test_pcm_refuses_other_rates(rate):
    with pytest.raises(ValidationError):
        AudioFormat(type="audio/pcm", rate=rate)


def test_pcm_rates_are_8_to_48_khz_and_24_khz_is_the_default():
    assert min(PCM_RATES) == 8000 and max(PCM_RATES) == 48000 and AudioFormat().rate == 24000


@pytest.mark.parametrize(
    ("beta", "ga"),
    [
        ("pcm16", ("audio/pcm", 24000)),
        ("g711_ulaw", ("audio/pcmu", 8000)),
        ("g711_alaw", ("audio/pcma", 8000)),
        ("opus", ("audio/opus", 24000)),
    ],
)
def test_beta_format_names(beta, ga):
    assert beta in BETA_FORMATS
    flat = apply_update(SessionConfig(), {"input_audio_format": beta, "output_audio_format": beta})
    nested = apply_update(SessionConfig(), {"audio": {"input": {"format": beta}, "output": {"format": beta}}})
    for cfg in (flat, nested):
        assert (cfg.audio.input.format.type, cfg.audio.input.format.rate) == ga
        assert (cfg.audio.output.format.type, cfg.audio.output.format.rate) == ga


def test_a_ga_format_with_another_pcm_rate():
    cfg = apply_update(
        SessionConfig(), {"audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}}
    )
    assert cfg.audio.input.format.rate == 16000 and cfg.audio.output.format.rate == 24000


@pytest.mark.parametrize("patch", [{"input_audio_format": "mp3"}, {"audio": {"input": {"format": "mp3"}}}])
def test_an_unknown_format_name_is_refused_at_the_format_type(patch):
    with pytest.raises(InvalidMessage) as err:
        apply_update(SessionConfig(), patch)
    assert err.value.details["param"] == "session.audio.input.format.type"


def test_switching_back_to_pcm_without_a_rate_is_24_khz():
    g711 = apply_update(SessionConfig(), {"audio": {"input": {"format": {"type": "audio/pcmu"}}}})
    back = apply_update(g711, {"audio": {"input": {"format": {"type": "audio/pcm"}}}})
    assert back.audio.input.format.rate == 24000


# ---- session.update: GA nested and beta flat fields


def test_ga_nested_fields_update_in_place():
    cfg = apply_update(
        SessionConfig(),
        {
            "instructions": "be brief",
            "output_modalities": ["text"],
            "max_output_tokens": 64,
            "audio": {
                "input": {"transcription": {"language": "fr"}, "noise_reduction": {"type": "near_field"}},
                "output": {"voice": "heart", "speed": 1.25},
            },
            "tools": [{"type": "function", "name": "f"}],
        },
    )
    assert (cfg.instructions, cfg.output_modalities, cfg.max_output_tokens) == ("be brief", ["text"], 64)
    assert cfg.audio.input.transcription.language == "fr" and cfg.audio.input.transcription.model == "default"
    assert (
        cfg.audio.input.noise_reduction is not None and cfg.audio.input.noise_reduction.type == "near_field"
    )
    assert (cfg.audio.output.voice, cfg.audio.output.speed) == ("heart", 1.25)
    assert cfg.audio.output.format.type == "audio/pcm"  # untouched
    assert [t.model_dump() for t in cfg.tools] == [
        {
            "type": "function",
            "name": "f",
            "description": "",
            "parameters": {"type": "object", "properties": {}},
        }
    ]


def test_an_empty_patch_changes_nothing():
    base = SessionConfig(instructions="x")
    assert apply_update(base, {}) == base
    assert apply_update(base, {"type": "realtime"}) == base


def test_a_patch_does_not_change_the_config_it_is_applied_to():
    base = SessionConfig()
    apply_update(base, {"instructions": "new", "audio": {"output": {"voice": "v"}}})
    assert base.instructions == "" and base.audio.output.voice == "default"


@pytest.mark.parametrize(
    ("modalities", "output"),
    [
        (["text"], ["text"]),
        (["audio"], ["audio"]),
        (["text", "audio"], ["audio"]),
        (["audio", "text"], ["audio"]),
    ],
)
def test_beta_modalities(modalities, output):
    assert apply_update(SessionConfig(), {"modalities": modalities}).output_modalities == output


def test_beta_speed_and_inf_tokens():
    cfg = apply_update(
        SessionConfig(max_output_tokens=10), {"speed": 0.5, "max_response_output_tokens": "inf"}
    )
    assert cfg.audio.output.speed == 0.5 and cfg.max_output_tokens == "inf"


def test_flat_beta_fields_win_over_their_ga_places_in_one_patch():
    cfg = apply_update(
        SessionConfig(), {"voice": "flat", "audio": {"output": {"voice": "nested", "speed": 1.1}}}
    )
    assert (cfg.audio.output.voice, cfg.audio.output.speed) == ("flat", 1.1)


@pytest.mark.parametrize(
    "patch",
    [
        {"turn_detection": None, "input_audio_transcription": None},
        {"audio": {"input": {"turn_detection": None, "transcription": None}}},
    ],
    ids=["beta", "ga"],
)
def test_null_turns_features_off_and_a_later_patch_turns_them_on(patch):
    off = apply_update(SessionConfig(), patch)
    assert off.audio.input.turn_detection is None and off.audio.input.transcription is None
    assert off.wire()["audio"]["input"]["turn_detection"] is None
    on = apply_update(off, {"turn_detection": {"type": "semantic_vad", "eagerness": "high"}})
    assert on.audio.input.turn_detection == TurnDetection(type="semantic_vad", eagerness="high")


def test_read_only_fields_are_ignored():
    base = SessionConfig()
    got = apply_update(base, {"id": "sess_x", "object": "realtime.session", "instructions": "y"})
    assert got.id == base.id and got.instructions == "y"


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"turn_detection": {"threshold": 0}}, "session.audio.input.turn_detection.threshold"),
        (
            {"turn_detection": {"silence_duration_ms": 50}},
            "session.audio.input.turn_detection.silence_duration_ms",
        ),
        ({"turn_detection": {"idle_timeout_ms": 5}}, "session.audio.input.turn_detection.idle_timeout_ms"),
        ({"turn_detection": {"type": "none"}}, "session.audio.input.turn_detection.type"),
        ({"voice": 5}, "session.audio.output.voice"),
        ({"speed": 0.1}, "session.audio.output.speed"),
        ({"instructions": 5}, "session.instructions"),
        ({"tools": "all"}, "session.tools"),
        ({"audio": None}, "session.audio"),
        ({"audio": {"input": {"format": {"rate": "fast"}}}}, "session.audio.input.format.rate"),
        ({"modalities": None}, "session.output_modalities"),
    ],
)
def test_bad_values_name_the_field(patch, param):
    with pytest.raises(InvalidMessage) as err:
        apply_update(SessionConfig(), patch)
    assert err.value.details["param"] == param
    assert param in err.value.message and err.value.wire_code == "invalid_event"


def test_a_bad_value_of_a_union_field_names_the_field():
    with pytest.raises(InvalidMessage) as err:
        apply_update(SessionConfig(), {"max_output_tokens": "lots"})
    assert err.value.details["param"] == "session.max_output_tokens"


def test_tools_are_checked_and_go_to_chat_completions_as_functions() -> None:
    from omnivox.core.errors import InvalidMessage
    from omnivox.protocol.realtime.session_config import chat_tool_choice, check_tools

    tool = {"type": "function", "name": "weather", "parameters": {"type": "object", "properties": {}}}
    cfg = apply_update(
        SessionConfig(), {"tools": [tool], "tool_choice": {"type": "function", "name": "weather"}}
    )
    assert cfg.tools[0].chat_tool()["function"]["name"] == "weather"
    assert chat_tool_choice(cfg.tool_choice) == {"type": "function", "function": {"name": "weather"}}
    for patch, param in [
        ({"tools": [{**tool, "name": "two words"}]}, "session.tools.0.name"),
        ({"tools": [{**tool, "parameters": {"type": "array"}}]}, "session.tools.0.parameters"),
        ({"tools": [{**tool, "strict": "maybe", "extra": 1}]}, "session.tools.0.extra"),
        ({"tool_choice": "sometimes"}, "session.tool_choice"),
    ]:
        with pytest.raises(InvalidMessage) as err:
            apply_update(cfg, patch)
        assert err.value.details["param"].startswith(param.rsplit(".", 1)[0]), (patch, err.value.details)
    # a response's own tools replace the session's for that response only
    tools, choice, parallel = check_tools(cfg, [{**tool, "name": "time"}], "required", False)
    assert ([t.name for t in tools], choice, parallel) == (["time"], "required", False)
    with pytest.raises(InvalidMessage) as err:
        check_tools(cfg, [{"type": "function", "name": "a b"}], None, None)
    assert err.value.details["param"] == "response.tools.0.name"


def test_a_transcription_session_always_transcribes_and_reports_its_own_shape() -> None:
    from omnivox.protocol.realtime.session_config import unserved

    cfg = apply_update(
        SessionConfig(), {"type": "transcription", "audio": {"input": {"transcription": None}}}
    )
    assert cfg.transcription_only and cfg.audio.input.transcription is not None
    wire = cfg.wire()
    assert (wire["type"], wire["object"], set(wire)) == (
        "transcription",
        "realtime.transcription_session",
        {"type", "object", "id", "audio", "include"},
    )
    said = unserved(
        {
            "input_audio_noise_reduction": None,
            "tracing": "auto",
            "audio": {"input": {"noise_reduction": {"type": "far_field"}, "transcription": {"prompt": ""}}},
        }
    )
    assert [p for p, _ in said] == ["session.tracing"]  # noise_reduction is served


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"audio": "x"}, "session.audio"),
        ({"audio": 5}, "session.audio"),
        ({"audio": {"input": "x"}}, "session.audio.input"),
        ({"audio": {"output": 7}}, "session.audio.output"),
    ],
)
def test_an_audio_object_of_the_wrong_shape_is_an_invalid_event_naming_it(patch, param):
    with pytest.raises(InvalidMessage) as err:
        apply_update(SessionConfig(), patch)
    assert err.value.details["param"] == param
