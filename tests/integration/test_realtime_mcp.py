"""MCP tools in /v1/realtime sessions: omnivox lists a real MCP server's tools, offers them to the
LLM, calls them and speaks what they return, with the GA events and items.

A live gateway and cascade worker whose LLM is the scripted OpenAI-compatible fake
(``fake_openai_service``: offered tools, it calls the one a test names; given results, it quotes
them); the MCP servers are real (``mcp_tool_server.py``: the ``mcp`` SDK's server on loopback, over
streamable HTTP and SSE, each demanding a bearer token). The official ``openai`` SDK is the client.
"""

from __future__ import annotations

import json
import time

import pytest

from cluster import cluster, free_port
from mcp_tool_server import TOKEN, ToolServer
from rtclient import Events, agents_sdk_transcripts, agents_sdk_turn, client, user_text

TIMEOUT_S = 4  # the worker's mcp_timeout_s


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return tmp_path_factory.mktemp("mcp")


@pytest.fixture(scope="module")
def mcp_cluster(fake_llm, logs):
    env = {
        **fake_llm.cascade_env(),
        "OMNIVOX_MCP_ALLOW_PRIVATE": "true",
        "OMNIVOX_MCP_TIMEOUT_S": str(TIMEOUT_S),
    }
    with cluster(workers=1, engine="cascade", log_dir=logs, **env) as c:
        yield c


@pytest.fixture(scope="module")
def http_tools(logs):
    server = ToolServer("http", logs / "http-calls.log")
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def idle_worker(mcp_cluster, fake_llm):
    mcp_cluster.wait_idle(1, timeout=15)
    fake_llm.state.call_tool = None
    fake_llm.state.tool_arguments = {}


def mcp_tool(url: str, **more) -> dict:
    return {
        "type": "mcp",
        "server_label": "notes",
        "server_url": url,
        "headers": {"Authorization": f"Bearer {TOKEN}"},
        "require_approval": "never",
        **more,
    }


async def listed(conn, events: Events, tool: dict, count: int = 1):
    """Set the session's MCP server; the mcp_list_tools item once it is listed."""
    await conn.session.update(
        session={
            "type": "realtime",
            "output_modalities": ["text"],
            "tools": [tool],
            "audio": {"input": {"turn_detection": None}},
        }
    )
    await events.wait_for("mcp_list_tools.completed", count=count, timeout=TIMEOUT_S + 10)
    return await events.wait_for("conversation.item.done", item__type="mcp_list_tools", count=count)


async def call_slow_lookup(conn, events: Events, url: str) -> None:
    """A response whose call of ``slow_lookup`` (on the server at ``url``) is running."""
    await listed(conn, events, mcp_tool(url))
    await conn.conversation.item.create(item=user_text("look it up"))
    await conn.response.create()
    await events.wait_for("response.mcp_call.in_progress", timeout=30)


def chats(fake_llm) -> list[dict]:
    return [r for r in fake_llm.state.requests if r["path"] == "chat"]


async def test_an_mcp_tool_is_listed_called_and_its_result_answered(mcp_cluster, fake_llm, http_tools, logs):
    fake_llm.state.call_tool, fake_llm.state.tool_arguments = "add", {"a": 2, "b": 3}
    async with client(mcp_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        done_list = await listed(conn, events, mcp_tool(http_tools.url))
        updated = events.of("session.updated")[0]
        await conn.conversation.item.create(item=user_text("what is two plus three"))
        await conn.response.create()
        done = await events.wait_for("response.done", timeout=30)
        await events.stop()

    # the listing: session.updated, then the item, in progress, completed, done with the tools
    kinds = [e.type for _, e in events.seen]
    start = kinds.index("session.updated")
    assert kinds[start : start + 4] == [
        "session.updated",
        "conversation.item.added",
        "mcp_list_tools.in_progress",
        "mcp_list_tools.completed",
    ]
    assert done_list.item.server_label == "notes"
    assert {t.name for t in done_list.item.tools} == {
        "add",
        "slow_lookup",
        "broken",
        "ramble",
        "delete_note",
        "whats_on",
    }
    tool_echo = updated.session.tools[0]
    assert tool_echo.server_label == "notes" and not tool_echo.headers  # secrets are never echoed

    # the call streams as an mcp_call item, runs, and the same response speaks its result
    assert done.response.status == "completed"
    call, message = done.response.output
    assert (call.type, call.name, call.server_label, call.output) == ("mcp_call", "add", "notes", "5")
    assert json.loads(call.arguments) == {"a": 2, "b": 3} and call.error is None
    assert message.content[0].text == "The tool said 5."
    sent = [e.type for e in events.of_response(done.response.id)]
    deltas = sent.count("response.mcp_call_arguments.delta")
    assert deltas >= 2
    texts = sent.count("response.output_text.delta")
    assert sent == [
        "response.created",
        "rate_limits.updated",
        "response.output_item.added",
        "conversation.item.added",
        *["response.mcp_call_arguments.delta"] * deltas,
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.output_item.done",
        "conversation.item.done",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * texts,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    first, second = chats(fake_llm)[-2:]
    assert "add" in [t["function"]["name"] for t in first["tools"]]
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": call_id(second), "content": "5"}
    assert http_tools.ran().count("add") == 1
    # the bearer token went to the MCP server (it refuses requests without) and into no log
    for log in logs.glob("*.log"):
        assert TOKEN not in log.read_text(), log.name


def call_id(chat: dict) -> str:
    return chat["messages"][-2]["tool_calls"][0]["id"]


async def test_allowed_tools_over_sse_and_a_failing_and_a_slow_tool(mcp_cluster, fake_llm, logs):
    sse = ToolServer("sse", logs / "sse-calls.log")
    try:
        async with client(mcp_cluster.ws).realtime.connect(model="omnivox") as conn:
            events = Events(conn)
            tool = mcp_tool(sse.url, allowed_tools=["broken", "slow_lookup"])
            done_list = await listed(conn, events, tool)
            assert [t.name for t in done_list.item.tools] == ["slow_lookup", "broken"]
            await conn.conversation.item.create(item=user_text("break it"))
            fake_llm.state.call_tool = "broken"
            await conn.response.create()
            failed = await events.wait_for("response.done", timeout=30)
            offered = [t["function"]["name"] for t in chats(fake_llm)[-2]["tools"]]
            fake_llm.state.call_tool, fake_llm.state.tool_arguments = "slow_lookup", {"seconds": 30}
            await conn.conversation.item.create(item=user_text("look it up"))
            began = time.monotonic()
            await conn.response.create()
            slow = await events.wait_for("response.done", count=2, timeout=TIMEOUT_S + 20)
            took = time.monotonic() - began
            await events.stop()
    finally:
        sse.stop()
    assert sorted(offered) == ["broken", "slow_lookup"]
    call, message = failed.response.output
    assert call.type == "mcp_call" and call.output is None
    assert call.error.type == "tool_execution_error"
    assert "response.mcp_call.failed" in [e.type for e in events.of_response(failed.response.id)]
    assert message.content[0].text.startswith("The tool said error: the tool call failed")
    call, message = slow.response.output
    assert (call.error.type, call.error.code) == ("http_error", 504)  # bounded: the worker's timeout
    assert took < TIMEOUT_S + 10
    assert message.content[0].text.startswith("The tool said error")


async def test_approval_requested_then_approved_and_denied(mcp_cluster, fake_llm, http_tools):
    fake_llm.state.call_tool, fake_llm.state.tool_arguments = "delete_note", {"title": "groceries"}
    before = http_tools.ran().count("delete_note")
    tool = mcp_tool(http_tools.url, require_approval={"always": {"tool_names": ["delete_note"]}})
    async with client(mcp_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await listed(conn, events, tool)
        for n, approve in enumerate((True, False)):
            await conn.conversation.item.create(item=user_text("delete my groceries note"))
            await conn.response.create()
            asked = await events.wait_for("response.done", count=2 * n + 1, timeout=30)
            (request,) = asked.response.output
            assert (request.type, request.name, request.server_label) == (
                "mcp_approval_request",
                "delete_note",
                "notes",
            )
            assert http_tools.ran().count("delete_note") == before + n  # nothing runs unapproved
            await conn.conversation.item.create(
                item={"type": "mcp_approval_response", "approval_request_id": request.id, "approve": approve}
            )
            await events.wait_for("conversation.item.done", item__type="mcp_approval_response", count=n + 1)
            await conn.response.create()
            answered = await events.wait_for("response.done", count=2 * n + 2, timeout=30)
            if approve:
                call, message = answered.response.output
                assert (call.type, call.approval_request_id, call.output) == (
                    "mcp_call",
                    request.id,
                    "deleted groceries",
                )
                assert message.content[0].text == "The tool said deleted groceries."
            else:
                (message,) = answered.response.output
                assert message.content[0].text == "The tool said the user did not approve this call."
        # an approval request is answered once; an unknown one is an error naming the field
        await conn.conversation.item.create(
            item={"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
        )
        err = await events.wait_for("error")
        await events.stop()
    assert err.error.param == "item.approval_request_id"
    assert http_tools.ran().count("delete_note") == before + 1  # approved once, run once


async def test_a_server_killed_mid_call_fails_the_call_and_the_reply_goes_on(mcp_cluster, fake_llm, logs):
    doomed = ToolServer("http", logs / "doomed-calls.log")
    try:
        fake_llm.state.call_tool, fake_llm.state.tool_arguments = "slow_lookup", {"seconds": 60}
        async with client(mcp_cluster.ws).realtime.connect(model="omnivox") as conn:
            events = Events(conn)
            await call_slow_lookup(conn, events, doomed.url)
            doomed.stop()
            killed_at = time.monotonic()
            done = await events.wait_for("response.done", timeout=TIMEOUT_S + 20)
            took = time.monotonic() - killed_at
            await events.stop()
    finally:
        doomed.stop()
    call, message = done.response.output
    assert done.response.status == "completed"
    assert call.error.type == "http_error" and call.output is None
    assert took < TIMEOUT_S + 5
    assert message.content[0].text.startswith("The tool said error")
    assert [e.type for e in events.of("response.mcp_call.failed")] == ["response.mcp_call.failed"]


async def test_a_listing_that_fails_says_so_and_the_next_update_tries_again(mcp_cluster, http_tools):
    closed = f"http://127.0.0.1:{free_port()}/mcp"
    async with client(mcp_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        for n, tool in enumerate(
            [
                mcp_tool(closed),  # nothing listens there
                {**mcp_tool(http_tools.url), "headers": {"Authorization": "Bearer wrong"}},  # refused: 401
            ],
            start=1,
        ):
            await conn.session.update(session={"type": "realtime", "tools": [tool]})
            failed = await events.wait_for("mcp_list_tools.failed", count=n, timeout=TIMEOUT_S + 10)
            item = await events.wait_for("conversation.item.done", item__type="mcp_list_tools", count=n)
            assert item.item.id == failed.item_id and item.item.tools == []
        await conn.session.update(session={"type": "realtime", "tools": [mcp_tool(http_tools.url)]})
        completed = await events.wait_for(
            "mcp_list_tools.completed", timeout=TIMEOUT_S + 10
        )  # the right token
        done = await events.wait_for("conversation.item.done", item__id=completed.item_id)
        await events.stop()
    assert "add" in [t.name for t in done.item.tools]
    assert not events.of("error")


async def test_a_responses_own_mcp_server_is_listed_before_it_runs(mcp_cluster, fake_llm, http_tools):
    fake_llm.state.call_tool = "whats_on"
    async with client(mcp_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await conn.session.update(
            session={
                "type": "realtime",
                "output_modalities": ["text"],
                "audio": {"input": {"turn_detection": None}},
            }
        )
        await conn.conversation.item.create(item=user_text("what is on today"))
        await conn.response.create(response={"tools": [mcp_tool(http_tools.url, allowed_tools=["whats_on"])]})
        done = await events.wait_for("response.done", timeout=30)
        await events.stop()
    kinds = [e.type for _, e in events.seen]
    assert kinds.index("mcp_list_tools.completed") < kinds.index("response.created")
    call, message = done.response.output
    assert (call.type, call.name, call.output) == ("mcp_call", "whats_on", "a concert")
    assert message.content[0].text == "The tool said a concert."


async def test_a_response_cancelled_during_a_slow_call_ends_and_the_session_goes_on(
    mcp_cluster, fake_llm, http_tools
):
    fake_llm.state.call_tool, fake_llm.state.tool_arguments = "slow_lookup", {"seconds": 60}
    async with client(mcp_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await call_slow_lookup(conn, events, http_tools.url)
        await conn.response.cancel()
        cancelled = await events.wait_for("response.done", timeout=5)
        fake_llm.state.call_tool, fake_llm.state.tool_arguments = "add", {"a": 1, "b": 1}
        await conn.conversation.item.create(item=user_text("then add one and one"))
        await conn.response.create()
        after = await events.wait_for("response.done", count=2, timeout=30)
        await events.stop()
    assert cancelled.response.status == "cancelled"
    (cut,) = cancelled.response.output
    assert (cut.type, cut.status, cut.output) == ("mcp_call", "incomplete", None)
    assert after.response.status == "completed"
    call, message = after.response.output
    assert call.output == "2" and message.content[0].text == "The tool said 2."
    last = chats(fake_llm)[-1]["messages"]
    cut_told = [m for m in last if m["role"] == "tool" and "abandoned" in m["content"]]
    assert len(cut_told) == 1  # the LLM knows the cut call never returned


async def test_the_agents_sdk_calls_its_own_mcp_server_through_omnivox(mcp_cluster, fake_llm, http_tools):
    """The Agents SDK's realtime model sends function tools only (its hosted MCP tools are not
    sent), so its MCP path is its own client: its ``mcp_servers`` become function tools that it
    runs and answers. That runs unchanged against omnivox."""
    from agents.mcp import MCPServerStreamableHttp
    from agents.realtime import RealtimeAgent, RealtimeRunner

    fake_llm.state.call_tool, fake_llm.state.tool_arguments = "add", {"a": 20, "b": 22}
    params = {"url": http_tools.url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
    async with MCPServerStreamableHttp(params, name="notes", client_session_timeout_seconds=10) as notes:
        agent = RealtimeAgent(name="Assistant", instructions="Be brief.", mcp_servers=[notes])
        session = await RealtimeRunner(starting_agent=agent).run(
            model_config={"url": f"{mcp_cluster.ws}/v1/realtime", "api_key": "secret"}
        )
        async with session:
            seen = await agents_sdk_turn(session, "What is twenty plus twenty-two?")
    tool_end = next(e for e in seen if e.type == "tool_end")
    assert "42" in str(tool_end.output)
    transcripts = agents_sdk_transcripts(seen)
    assert any(t and "42" in t for t in transcripts)


async def test_a_huge_output_is_cut_to_a_bound(mcp_cluster, fake_llm, http_tools):
    fake_llm.state.call_tool, fake_llm.state.tool_arguments = "ramble", {"n": 50_000}
    async with client(mcp_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await listed(conn, events, mcp_tool(http_tools.url))
        await conn.conversation.item.create(item=user_text("talk a lot"))
        await conn.response.create()
        done = await events.wait_for("response.done", timeout=30)
        await events.stop()
    call = done.response.output[0]
    assert call.output.startswith("la la ") and call.output.endswith("more characters cut]")
    assert len(call.output) < 33_000
    told = chats(fake_llm)[-1]["messages"][-1]
    assert told["role"] == "tool" and told["content"] == call.output
