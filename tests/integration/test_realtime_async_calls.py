"""Asynchronous function calls in /v1/realtime: the reply goes on while the client runs the
function, and the output, when it comes, starts a response that uses it, once.

A live gateway and cascade worker (hibari speaks, PocketSphinx hears) whose LLM is the scripted
OpenAI-compatible fake (``fake_openai_service``: offered tools, it calls the first; with results
since the user spoke, it quotes them). The official ``openai`` SDK is the client.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from cluster import cluster
from rtclient import Events, client, silence, speech, stream, user_text

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city today.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
PENDING = "The tool said the function is running and its result will come later; say so briefly and go on."
SETTLE_S = 2.0  # how long a test waits to see that no further response starts


@pytest.fixture(scope="module")
def voice_cluster(fake_llm, tmp_path_factory):
    env = fake_llm.cascade_env()
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("async"), **env) as c:
        yield c


@pytest.fixture(autouse=True)
def idle_worker(voice_cluster):
    voice_cluster.wait_idle(1, timeout=15)


def chats_with(fake_llm, content: str) -> list[dict]:
    """The chat requests whose messages carry a tool result ``content``."""
    return [
        r
        for r in fake_llm.state.requests
        if r["path"] == "chat" and any(m["role"] == "tool" and m["content"] == content for m in r["messages"])
    ]


async def session(conn, turn_detection=None, per_tool: bool = False) -> Events:
    events = Events(conn)
    tool = {**WEATHER, "async": True} if per_tool else WEATHER
    await conn.session.update(
        session={
            "type": "realtime",
            "tools": [tool],
            "audio": {"input": {"turn_detection": turn_detection}},
            "omnivox": {"async_function_calls": not per_tool},
        }
    )
    updated = await events.wait_for("session.updated")
    assert updated.session.tools[0].name == "get_weather"
    return events


async def test_an_output_answered_during_the_reply_starts_the_next_response(voice_cluster, fake_llm):
    async with client(voice_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = await session(conn, per_tool=True)
        await conn.conversation.item.create(item=user_text("what is the weather in paris"))
        await conn.response.create()
        args = await events.wait_for("response.function_call_arguments.done")
        await events.wait_for("response.output_audio.delta")  # the reply goes on speaking
        await conn.conversation.item.create(
            item={"type": "function_call_output", "call_id": args.call_id, "output": "sunny and warm"}
        )
        first = await events.wait_for("response.done", timeout=30)
        second = await events.wait_for("response.done", count=2, timeout=30)
        await asyncio.sleep(SETTLE_S)
        await events.stop()

    assert not events.of("error")
    call, message = first.response.output
    assert (call.type, call.name, call.status) == ("function_call", "get_weather", "completed")
    assert first.response.status == "completed"
    assert message.content[0].transcript == PENDING  # it said it is on it, without the result
    # the call's item was done before the response: the client could run it at once
    kinds = [e.type for e in events.of_response(first.response.id)]
    assert kinds.index("response.output_item.done") < kinds.index("response.output_audio.delta")
    assert second.response.output[0].content[0].transcript == "The tool said sunny and warm."
    created = [e.response.id for e in events.of("response.created")]
    assert created == [first.response.id, second.response.id]  # once: no third response
    assert len(chats_with(fake_llm, "sunny and warm")) == 1


async def test_an_output_waiting_through_a_barge_in_is_read_by_the_turn_after_it(voice_cluster, fake_llm):
    vad = {"type": "server_vad", "silence_duration_ms": 500}
    async with client(voice_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = await session(conn, turn_detection=vad)
        await conn.conversation.item.create(item=user_text("what is the weather in rome"))
        await conn.response.create()
        args = await events.wait_for("response.function_call_arguments.done")
        await events.wait_for("response.output_audio.delta")
        await conn.conversation.item.create(
            item={"type": "function_call_output", "call_id": args.call_id, "output": "rain in rome"}
        )
        # the user talks over the reply: it is cut, and their turn gets the next response
        words = np.concatenate([speech("and what about tomorrow please"), silence(1.2)])
        await stream(conn, words, chunk_ms=40, speed=1)
        cut = await events.wait_for("response.done", timeout=30)
        answer = await events.wait_for("response.done", count=2, timeout=30)
        await stream(conn, silence(SETTLE_S), chunk_ms=100, speed=1)
        await events.stop()

    assert cut.response.status == "cancelled"
    assert answer.response.status == "completed"
    read = chats_with(fake_llm, "rain in rome")
    assert read and read[0]["messages"][-1]["role"] == "user"  # the user's turn read the result
    created = [e.response.id for e in events.of("response.created")]
    assert created == [cut.response.id, answer.response.id]  # never answered twice


async def test_an_output_that_never_comes_loses_nothing(voice_cluster, fake_llm):
    async with client(voice_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = await session(conn)
        await conn.conversation.item.create(item=user_text("what is the weather in oslo"))
        await conn.response.create(response={"output_modalities": ["text"]})
        first = await events.wait_for("response.done", timeout=30)
        await asyncio.sleep(SETTLE_S)
        assert len(events.of("response.created")) == 1  # nothing starts on its own
        await conn.conversation.item.create(item=user_text("never mind, tell me a joke"))
        await conn.response.create(response={"output_modalities": ["text"], "tool_choice": "none"})
        second = await events.wait_for("response.done", count=2, timeout=30)
        await events.stop()
    assert not events.of("error")
    assert first.response.output[1].content[0].text == PENDING
    assert second.response.status == "completed"
    last = [r for r in fake_llm.state.requests if r["path"] == "chat"][-1]
    assert all(m["role"] != "tool" for m in last["messages"])  # an unanswered call is left out
