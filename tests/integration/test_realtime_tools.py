"""/v1/realtime function calling, transcription sessions and the GA details strict clients read.

A live gateway and cascade worker whose LLM is the scripted OpenAI-compatible fake
(``fake_openai_service``: offered tools, it calls the first; given the results, it quotes them), so
the tests know what each reply says. The official ``openai`` SDK drives the raw events; the OpenAI
Agents SDK's ``RealtimeAgent`` runs unchanged against omnivox.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from cluster import cluster
from omnivox.voice.asr.base import word_error_rate
from rtclient import (
    OMNIVOX_EVENTS,
    Events,
    agents_sdk_transcripts,
    agents_sdk_turn,
    audio_of,
    client,
    silence,
    speech,
    stream,
    user_text,
)

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city today.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TIME_TOOL = {"type": "function", "name": "get_time", "description": "The time now.", "parameters": {}}
SENTENCE = "the quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def tool_cluster(fake_llm, tmp_path_factory):
    env = fake_llm.cascade_env()
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("tools"), **env) as c:
        yield c


@pytest.fixture(autouse=True)
def idle_worker(tool_cluster, fake_llm):
    tool_cluster.wait_idle(1, timeout=15)
    fake_llm.state.parallel_calls = False


async def test_a_tool_call_streams_in_ga_order_and_its_result_is_spoken(tool_cluster, fake_llm):
    async with client(tool_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await conn.session.update(
            session={
                "type": "realtime",
                "tools": [WEATHER_TOOL],
                "tool_choice": "auto",
                "audio": {"input": {"turn_detection": None}},
            }
        )
        updated = await events.wait_for("session.updated")
        assert updated.session.tools[0].name == "get_weather"
        await conn.conversation.item.create(item=user_text("what is the weather in paris"))
        await conn.response.create()
        done = await events.wait_for("response.done")

        call = done.response.output[0]
        assert done.response.status == "completed" and len(done.response.output) == 1
        assert (call.type, call.name, json.loads(call.arguments)) == (
            "function_call",
            "get_weather",
            {"city": "Paris"},
        )
        assert call.call_id.startswith("call_fake_")
        sent = [e.type for e in events.of_response(done.response.id)]
        deltas = sent.count("response.function_call_arguments.delta")
        assert deltas >= 2  # the arguments streamed in pieces
        assert sent == [
            "response.created",
            "rate_limits.updated",
            "response.output_item.added",
            "conversation.item.added",
            *["response.function_call_arguments.delta"] * deltas,
            "response.function_call_arguments.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
        ]
        args_done = events.of("response.function_call_arguments.done")[0]
        assert (args_done.call_id, args_done.name, args_done.arguments) == (
            call.call_id,
            call.name,
            call.arguments,
        )
        assert done.response.usage.input_tokens == 42  # the LLM's own count

        # the client runs the function, gives its output and asks for the reply that uses it
        await conn.conversation.item.create(
            item={"type": "function_call_output", "call_id": call.call_id, "output": "sunny and warm"}
        )
        added = await events.wait_for("conversation.item.added", item__type="function_call_output")
        item_done = await events.wait_for("conversation.item.done", item__type="function_call_output")
        assert added.item.call_id == item_done.item.call_id == call.call_id
        await conn.response.create()
        spoken = await events.wait_for("response.done", count=2)
        await events.stop()

    assert spoken.response.status == "completed"
    transcript = spoken.response.output[0].content[0].transcript
    assert transcript == "The tool said sunny and warm."
    assert len(audio_of(events, spoken.response.id)) > 12000  # it was spoken
    usage = spoken.response.usage
    assert (
        usage.output_token_details.audio_tokens > 0
        and "output_token_details.audio_tokens" in (usage.model_extra["omnivox_estimated"])
    )
    second = [r for r in fake_llm.state.requests if r["path"] == "chat"][-1]
    assert second["tools"][0]["function"]["name"] == "get_weather"
    assistant, tool = second["messages"][-2:]
    assert assistant["tool_calls"][0]["id"] == tool["tool_call_id"] == call.call_id
    assert tool["content"] == "sunny and warm"


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


async def test_an_image_item_reaches_the_vision_llm_as_an_image_part(tool_cluster, fake_llm):
    async with client(tool_cluster.ws).realtime.connect(model="omnivox", extra_query=OMNIVOX_EVENTS) as conn:
        events = Events(conn)
        await conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        await events.wait_for("session.updated")
        image = {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}
        text = {"type": "input_text", "text": "what is in this picture"}
        await conn.conversation.item.create(
            item={"type": "message", "role": "user", "content": [text, image]}
        )
        added = await events.wait_for("conversation.item.added")
        await conn.response.create()
        done = await events.wait_for("response.done")
        await events.stop()
    assert [c.type for c in added.item.content] == ["input_text", "input_image"]
    assert done.response.status == "completed"
    assert not events.of("omnivox.warning")  # this LLM sees
    user = [r for r in fake_llm.state.requests if r["path"] == "chat"][-1]["messages"][-1]
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in this picture"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ],
    }


async def test_parallel_calls_and_per_response_tools(tool_cluster, fake_llm):
    fake_llm.state.parallel_calls = True
    async with client(tool_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await conn.session.update(session={"type": "realtime", "audio": {"input": {"turn_detection": None}}})
        await conn.conversation.item.create(item=user_text("weather and time please"))
        await conn.response.create(
            response={"tools": [WEATHER_TOOL, TIME_TOOL], "output_modalities": ["text"]}
        )
        done = await events.wait_for("response.done")
        calls = done.response.output
        assert [c.name for c in calls] == ["get_weather", "get_time"]
        assert [e.output_index for e in events.of("response.output_item.added")] == [0, 1]
        for n, c in enumerate(calls):
            await conn.conversation.item.create(
                item={"type": "function_call_output", "call_id": c.call_id, "output": f"result {n}"}
            )
        await events.wait_for("conversation.item.done", count=5)
        await conn.response.create(
            response={"output_modalities": ["text"], "tools": [WEATHER_TOOL, TIME_TOOL]}
        )
        said = await events.wait_for("response.done", count=2)
        await events.stop()
    assert said.response.output[0].content[0].text == "The tool said result 0 and result 1."
    last = [r for r in fake_llm.state.requests if r["path"] == "chat"][-1]["messages"]
    assert [m["role"] for m in last[-3:]] == ["assistant", "tool", "tool"]  # one message, both calls
    assert len(last[-3]["tool_calls"]) == 2


async def test_bad_tools_and_outputs_for_unmade_calls_are_errors_naming_the_field(tool_cluster):
    async with client(tool_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        bad = [
            ({"tools": [{**WEATHER_TOOL, "name": "no spaces allowed"}]}, "session.tools.0.name"),
            ({"tools": [{**WEATHER_TOOL, "parameters": {"type": "string"}}]}, "session.tools.0.parameters"),
            ({"tools": [{"type": "mcp", "server_label": "x"}]}, "session.tools.0.server_url"),
            ({"tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "name": "nope"}}, "session"),
        ]
        for n, (patch, param) in enumerate(bad, start=1):
            await conn.session.update(session={"type": "realtime", **patch})
            err = await events.wait_for("error", count=n)
            assert (err.error.code, err.error.param) == ("invalid_event", param), err.error
        await conn.conversation.item.create(
            item={"type": "function_call_output", "call_id": "call_never_made", "output": "x"}
        )
        err = await events.wait_for("error", count=len(bad) + 1)
        assert (err.error.code, err.error.param) == ("call_not_found", "item.call_id")
        await conn.conversation.item.create(
            item={"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
        )
        await events.wait_for("conversation.item.done")
        for _ in range(2):
            await conn.conversation.item.create(
                item={"type": "function_call_output", "call_id": "c1", "output": "ok"}
            )
        err = await events.wait_for("error", count=len(bad) + 2)
        assert (err.error.code, err.error.param) == ("invalid_event", "item.call_id")
        await conn.response.create(response={"tools": [{"type": "function", "name": "a b"}]})
        err = await events.wait_for("error", count=len(bad) + 3)
        assert err.error.param == "response.tools.0.name"
        await events.stop()
        assert not events.of("response.created")


async def test_the_agents_sdk_calls_a_tool_and_speaks_its_result(tool_cluster, fake_llm):
    from agents import function_tool
    from agents.realtime import RealtimeAgent, RealtimeRunner

    asked: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city today."""
        asked.append(city)
        return f"sunny in {city}"

    agent = RealtimeAgent(name="Assistant", instructions="Be brief.", tools=[get_weather])
    runner = RealtimeRunner(starting_agent=agent)
    session = await runner.run(model_config={"url": f"{tool_cluster.ws}/v1/realtime", "api_key": "secret"})
    async with session:
        seen = await agents_sdk_turn(session, "What is the weather in Paris?")
    assert asked == ["Paris"]
    tool_end = next(e for e in seen if e.type == "tool_end")
    assert tool_end.output == "sunny in Paris"
    audio = b"".join(e.audio.data for e in seen if e.type == "audio")
    assert len(audio) > 24000  # half a second of speech at least
    transcripts = agents_sdk_transcripts(seen)
    assert "The tool said sunny in Paris." in transcripts


async def test_a_transcription_session_hears_turns_and_never_responds(tool_cluster):
    async with client(tool_cluster.ws).realtime.connect(model="omnivox", extra_query=OMNIVOX_EVENTS) as conn:
        events = Events(conn)
        await conn.session.update(
            session={
                "type": "transcription",
                "audio": {
                    "input": {
                        "transcription": {"model": "gpt-4o-transcribe"},
                        "noise_reduction": {"type": "near_field"},
                        "turn_detection": {"type": "server_vad", "silence_duration_ms": 500},
                    }
                },
            }
        )
        updated = await events.wait_for("session.updated")
        assert updated.session.type == "transcription"
        await events.wait_for("omnivox.warning")
        warned = {w.param for w in events.of("omnivox.warning")}
        assert warned == {"session.audio.input.transcription.model"}  # noise_reduction is served
        clip = np.concatenate([silence(0.3), speech(SENTENCE), silence(1.0)])
        await stream(conn, np.concatenate([clip, clip]), chunk_ms=40, speed=3)
        done = await events.wait_for("conversation.item.input_audio_transcription.completed", count=2)
        await conn.response.create()
        err = await events.wait_for("error")
        await asyncio.sleep(0.3)
        await events.stop()
    assert word_error_rate(SENTENCE, done.transcript) <= 0.2
    assert err.error.param == "session.type"
    assert len(events.of("input_audio_buffer.committed")) == 2
    assert events.of("conversation.item.input_audio_transcription.delta")
    assert not events.of("response.created")
    assert len(events.of("omnivox.warning")) == 1  # said once


async def test_idle_timeout_before_any_reply_and_item_events(tool_cluster):
    async with client(tool_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await conn.session.update(
            session={
                "type": "realtime",
                "output_modalities": ["text"],
                "audio": {"input": {"turn_detection": {"type": "server_vad", "idle_timeout_ms": 1000}}},
            }
        )
        await stream(conn, silence(2.0), chunk_ms=100, speed=1)
        timeout = await events.wait_for("input_audio_buffer.timeout_triggered")
        created = await events.wait_for("response.created")
        await events.wait_for("response.done")
        await events.stop()
    assert timeout.audio_end_ms >= timeout.audio_start_ms
    order = [e for _, e in events.seen]
    assert order.index(timeout) < order.index(created)
