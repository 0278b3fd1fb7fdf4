"""MCP tools in a session's configuration: their checks, filters, and secrets kept off the wire."""

from __future__ import annotations

import pytest

from omnivox.core.errors import InvalidMessage
from omnivox.protocol.realtime.session_config import McpTool, SessionConfig, apply_update

SERVER = {"type": "mcp", "server_label": "notes", "server_url": "https://tools.example.com/mcp"}


def mcp(**over) -> McpTool:
    return McpTool.model_validate({**SERVER, **over})


def param_of(patch: dict) -> str:
    with pytest.raises(InvalidMessage) as err:
        apply_update(SessionConfig(), patch)
    return err.value.details["param"]


def test_function_and_mcp_tools_are_kept_apart():
    config = apply_update(
        SessionConfig(), {"tools": [SERVER, {"type": "function", "name": "weather", "parameters": {}}]}
    )
    assert [t.server_label for t in config.mcp_servers] == ["notes"]
    assert [t.name for t in config.functions] == ["weather"]


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"type": "mcp", "server_label": "notes"}, "session.tools.0.server_url"),
        ({**SERVER, "server_url": None, "connector_id": "connector_gmail"}, "session.tools.0.server_url"),
        ({**SERVER, "server_url": "file:///etc/passwd"}, "session.tools.0.server_url"),
        ({**SERVER, "server_label": "no spaces"}, "session.tools.0.server_label"),
        ({**SERVER, "require_approval": "sometimes"}, "session.tools.0.require_approval"),
        ({"type": "web_search"}, "session.tools.0"),
    ],
)
def test_bad_mcp_tools_are_errors_naming_the_field(tool, param):
    assert param_of({"tools": [tool]}) == param


def test_two_servers_with_one_label_are_refused():
    assert param_of({"tools": [SERVER, SERVER]}) == "session"


def test_allowed_tools_by_name_or_filter():
    assert mcp().allows("anything", read_only=False)
    assert mcp(allowed_tools=["a"]).allows("a", False) and not mcp(allowed_tools=["a"]).allows("b", False)
    read_only = mcp(allowed_tools={"read_only": True})
    assert read_only.allows("look", True) and not read_only.allows("write", False)


def test_approval_is_needed_unless_said_otherwise():
    assert mcp().needs_approval("x", False)  # OpenAI's default: always
    assert not mcp(require_approval="never").needs_approval("x", False)
    split = mcp(require_approval={"never": {"read_only": True}, "always": {"tool_names": ["rm"]}})
    assert not split.needs_approval("look", True)
    assert split.needs_approval("rm", False)
    only_never = mcp(require_approval={"never": {"tool_names": ["look"]}})
    assert not only_never.needs_approval("look", False) and only_never.needs_approval("rm", False)


def test_headers_and_token_reach_the_server_and_never_the_wire():
    tool = mcp(headers={"X-Team": "a"}, authorization="tok")
    assert tool.request_headers() == {"X-Team": "a", "Authorization": "Bearer tok"}
    config = apply_update(SessionConfig(), {"tools": [{**SERVER, "headers": {"Authorization": "Bearer s"}}]})
    wire = config.wire()["tools"][0]
    assert "headers" not in wire and "authorization" not in wire
    assert config.mcp_servers[0].request_headers() == {"Authorization": "Bearer s"}  # kept for the calls
    again = apply_update(config, {"instructions": "hi"})  # a later update keeps them
    assert again.mcp_servers[0].request_headers() == {"Authorization": "Bearer s"}


def test_async_functions_per_tool_and_per_session():
    tool = {"type": "function", "name": "weather", "parameters": {}, "async": True}
    config = apply_update(SessionConfig(), {"tools": [tool], "omnivox": {"async_function_calls": True}})
    assert config.functions[0].run_async and config.omnivox.async_function_calls
    assert config.wire()["tools"][0]["async"] is True  # said back as it was given
    again = apply_update(config, {"instructions": "hi"})  # survives later updates
    assert again.functions[0].run_async
    assert not apply_update(SessionConfig(), {"tools": [{**tool, "async": False}]}).functions[0].run_async
