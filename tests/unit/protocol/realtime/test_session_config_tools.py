"""Session tools (names, schemas, tool_choice), a response's own tools, omnivox's extension
options and their bounds, and the settings accepted but not served."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from omnivox.core.config import BACKCHANNELS
from omnivox.core.errors import InvalidMessage
from omnivox.protocol.realtime.session_config import (
    FunctionTool,
    OmnivoxOptions,
    SessionConfig,
    ToolChoiceFunction,
    apply_update,
    chat_tool_choice,
    check_tools,
    unserved,
)

TOOL = {"type": "function", "name": "weather", "parameters": {"type": "object", "properties": {}}}


def tool(**over) -> dict:
    return {**TOOL, **over}


def param_of(patch: dict, config: SessionConfig | None = None) -> str:
    with pytest.raises(InvalidMessage) as err:
        apply_update(config or SessionConfig(), patch)
    return err.value.details["param"]


# ---- FunctionTool


@pytest.mark.parametrize("name", ["a", "get_weather", "get-weather", "A1_b-2", "x" * 64])
def test_tool_names_that_are_accepted(name):
    assert FunctionTool(name=name).name == name


@pytest.mark.parametrize(
    "name", ["", "x" * 65, "two words", "dot.name", "ünïcode", "semi;colon", "new\nline"]
)
def test_tool_names_that_are_refused(name):
    with pytest.raises(ValidationError, match="a tool name is 1-64"):
        FunctionTool(name=name)


def test_a_tool_defaults_to_an_empty_object_schema_and_no_description():
    t = FunctionTool(name="f")
    assert t.type == "function" and t.description == ""
    assert t.parameters == {"type": "object", "properties": {}}


def test_default_schemas_are_not_shared():
    a, b = FunctionTool(name="a"), FunctionTool(name="b")
    a.parameters["properties"]["x"] = {"type": "string"}
    assert b.parameters == {"type": "object", "properties": {}}


def test_a_schema_without_a_type_or_properties_is_taken_as_an_object():
    assert FunctionTool(name="f", parameters={}).parameters == {}
    schema = {"type": "object"}
    assert FunctionTool(name="f", parameters=schema).parameters == schema


@pytest.mark.parametrize("schema", [{"type": "array"}, {"type": "string"}, {"type": None}])
def test_a_schema_of_another_type_is_refused(schema):
    with pytest.raises(ValidationError, match='"type": "object"'):
        FunctionTool(name="f", parameters=schema)


@pytest.mark.parametrize("properties", [[], "x", 1, None])
def test_properties_must_be_an_object(properties):
    with pytest.raises(ValidationError, match="properties must be an object"):
        FunctionTool(name="f", parameters={"type": "object", "properties": properties})


def test_a_description_has_a_limit():
    assert len(FunctionTool(name="f", description="d" * 8192).description) == 8192
    with pytest.raises(ValidationError):
        FunctionTool(name="f", description="d" * 8193)


def test_a_tool_refuses_unknown_fields_and_other_types():
    with pytest.raises(ValidationError):
        FunctionTool(name="f", strict=True)
    with pytest.raises(ValidationError):
        FunctionTool(type="mcp", name="f")


def test_chat_tool_is_the_chat_completions_shape():
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    t = FunctionTool(name="weather", description="the weather", parameters=schema)
    assert t.chat_tool() == {
        "type": "function",
        "function": {"name": "weather", "description": "the weather", "parameters": schema},
    }


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_string_tool_choices_pass_through(choice):
    assert chat_tool_choice(choice) == choice


def test_a_function_tool_choice_ignores_extra_fields():
    choice = ToolChoiceFunction.model_validate({"type": "function", "name": "f", "extra": 1})
    assert chat_tool_choice(choice) == {"type": "function", "function": {"name": "f"}}


# ---- session tools


def test_a_session_takes_up_to_128_tools():
    many = [tool(name=f"t{i}") for i in range(128)]
    assert len(apply_update(SessionConfig(), {"tools": many}).tools) == 128
    assert param_of({"tools": [*many, tool(name="t128")]}) == "session.tools"


def test_a_tool_choice_must_name_a_session_tool():
    with pytest.raises(InvalidMessage, match="not in tools"):
        apply_update(SessionConfig(), {"tool_choice": {"type": "function", "name": "weather"}})


def test_removing_the_tool_a_choice_names_is_refused():
    cfg = apply_update(
        SessionConfig(), {"tools": [TOOL], "tool_choice": {"type": "function", "name": "weather"}}
    )
    with pytest.raises(InvalidMessage, match="not in tools"):
        apply_update(cfg, {"tools": []})
    assert [t.name for t in cfg.tools] == ["weather"]


def test_a_bad_tool_names_its_index():
    assert param_of({"tools": [TOOL, tool(name="bad name")]}) == "session.tools.1.name"


def test_the_session_tool_defaults():
    cfg = SessionConfig()
    assert cfg.tools == [] and cfg.tool_choice == "auto" and cfg.parallel_tool_calls is True


# ---- a response's tools


def session_with_tools() -> SessionConfig:
    return apply_update(
        SessionConfig(), {"tools": [TOOL], "tool_choice": "required", "parallel_tool_calls": False}
    )


def test_a_response_without_its_own_tools_uses_the_sessions():
    cfg = session_with_tools()
    tools, choice, parallel = check_tools(cfg, None, None, None)
    assert tools is cfg.tools and choice == "required" and parallel is False


def test_a_response_may_change_only_its_choice():
    cfg = session_with_tools()
    tools, choice, parallel = check_tools(cfg, None, "none", None)
    assert [t.name for t in tools] == ["weather"] and choice == "none" and parallel is False


def test_a_response_may_change_only_parallel_calls():
    cfg = session_with_tools()
    _, choice, parallel = check_tools(cfg, None, None, True)
    assert choice == "required" and parallel is True


def test_a_response_may_have_no_tools_at_all():
    cfg = session_with_tools()
    tools, _, _ = check_tools(cfg, [], None, None)
    assert tools == []


def test_a_response_choice_may_name_the_sessions_tool():
    cfg = session_with_tools()
    _, choice, _ = check_tools(cfg, None, {"type": "function", "name": "weather"}, None)
    assert isinstance(choice, ToolChoiceFunction) and choice.name == "weather"


def test_a_response_choice_naming_an_unknown_tool_is_refused():
    cfg = session_with_tools()
    with pytest.raises(InvalidMessage) as err:
        check_tools(cfg, None, {"type": "function", "name": "nope"}, None)
    assert err.value.details["param"].startswith("response")
    assert "not in tools" in err.value.message


def test_a_bad_response_choice_names_the_field():
    with pytest.raises(InvalidMessage) as err:
        check_tools(SessionConfig(), None, "sometimes", None)
    assert err.value.details["param"].startswith("response.tool_choice")


def test_a_bad_response_schema_names_the_field():
    with pytest.raises(InvalidMessage) as err:
        check_tools(SessionConfig(), [tool(parameters={"type": "array"})], None, None)
    assert err.value.details["param"] == "response.tools.0.parameters"


def test_a_response_does_not_change_the_session():
    cfg = session_with_tools()
    check_tools(cfg, [tool(name="time")], "auto", True)
    assert [t.name for t in cfg.tools] == ["weather"]
    assert cfg.tool_choice == "required" and cfg.parallel_tool_calls is False


# ---- omnivox's options


def test_the_omnivox_option_defaults():
    o = OmnivoxOptions()
    assert o.echo_guard is True and o.echo_canceller == "gate" and o.echo_gate_factor == 0.7
    assert o.false_interruption_ms == 1500 and o.backchannel_max_ms == 1500
    assert o.backchannels == list(BACKCHANNELS)


def test_default_backchannels_are_a_fresh_list():
    a, b = OmnivoxOptions(), OmnivoxOptions()
    a.backchannels.append("zzz")
    assert "zzz" not in b.backchannels


@pytest.mark.parametrize(
    ("field", "good", "bad"),
    [
        ("echo_gate_factor", [0.01, 1.0, 4.0], [0, -1, 4.01]),
        ("false_interruption_ms", [0, 1500, 10000], [-1, 10001]),
        ("backchannel_max_ms", [0, 5000], [-1, 5001]),
    ],
)
def test_numeric_option_bounds(field, good, bad):
    for value in good:
        cfg = apply_update(SessionConfig(), {"omnivox": {field: value}})
        assert getattr(cfg.omnivox, field) == value
    for value in bad:
        assert param_of({"omnivox": {field: value}}) == f"session.omnivox.{field}"


@pytest.mark.parametrize("kind", ["gate", "aec3", "none"])
def test_the_echo_cancellers(kind):
    assert apply_update(SessionConfig(), {"omnivox": {"echo_canceller": kind}}).omnivox.echo_canceller == kind


def test_an_unknown_echo_canceller_is_refused():
    assert param_of({"omnivox": {"echo_canceller": "speex"}}) == "session.omnivox.echo_canceller"


def test_backchannel_bounds():
    ok = apply_update(SessionConfig(), {"omnivox": {"backchannels": ["x" * 64] * 200}})
    assert len(ok.omnivox.backchannels) == 200
    assert param_of({"omnivox": {"backchannels": ["x"] * 201}}) == "session.omnivox.backchannels"
    assert param_of({"omnivox": {"backchannels": ["ok", "x" * 65]}}) == "session.omnivox.backchannels.1"


def test_an_empty_backchannel_list_is_allowed():
    assert apply_update(SessionConfig(), {"omnivox": {"backchannels": []}}).omnivox.backchannels == []


def test_omnivox_options_merge_field_by_field():
    cfg = apply_update(SessionConfig(), {"omnivox": {"echo_guard": False}})
    cfg = apply_update(cfg, {"omnivox": {"false_interruption_ms": 0}})
    assert cfg.omnivox.echo_guard is False and cfg.omnivox.false_interruption_ms == 0
    assert cfg.omnivox.echo_gate_factor == 0.7


def test_unknown_omnivox_options_are_ignored():
    cfg = apply_update(SessionConfig(), {"omnivox": {"future_setting": 1}})
    assert cfg.omnivox == OmnivoxOptions()


def test_the_options_are_in_the_wire_form():
    wire = apply_update(SessionConfig(), {"omnivox": {"echo_canceller": "none"}}).wire()
    assert wire["omnivox"]["echo_canceller"] == "none"


def test_assignment_is_validated():
    o = OmnivoxOptions()
    with pytest.raises(ValidationError):
        o.echo_gate_factor = 0


# ---- unserved settings


def test_nothing_unserved_in_an_ordinary_patch():
    assert unserved({"instructions": "be brief", "voice": "alloy", "tools": [TOOL]}) == []
    assert unserved({}) == []


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"include": ["item.input_audio_transcription.logprobs"]}, "session.include"),
        ({"truncation": "auto"}, "session.truncation"),
        ({"prompt": {"id": "pmpt_1"}}, "session.prompt"),
        ({"reasoning": {"effort": "low"}}, "session.reasoning"),
        (
            {"audio": {"input": {"transcription": {"prompt": "names: Ada"}}}},
            "session.audio.input.transcription.prompt",
        ),
        ({"input_audio_transcription": {"prompt": "names: Ada"}}, "session.audio.input.transcription.prompt"),
    ],
)
def test_each_unserved_setting_is_named(patch, param):
    said = unserved(patch)
    assert [p for p, _ in said] == [param]
    assert said[0][1]


@pytest.mark.parametrize("empty", [None, [], {}, ""])
def test_empty_unserved_settings_say_nothing(empty):
    assert unserved({"include": empty, "tracing": empty, "truncation": empty}) == []


def test_unserved_settings_are_listed_in_a_fixed_order():
    said = unserved(
        {"reasoning": {"x": 1}, "tracing": "auto", "audio": {"input": {"noise_reduction": {"t": 1}}}}
    )
    assert [p for p, _ in said] == ["session.tracing", "session.reasoning"]


def test_unserved_does_not_mind_odd_shapes():
    assert unserved({"audio": {"input": {"transcription": None}}}) == []
    assert unserved({"audio": None, "include": None}) == []


def test_an_unknown_noise_reduction_is_refused():
    assert param_of({"audio": {"input": {"noise_reduction": {"type": "loud"}}}}) == (
        "session.audio.input.noise_reduction.type"
    )
