"""Third-party realtime clients, unchanged, against a real gateway and cascade worker on loopback.

pipecat 1.14 (``OpenAIRealtimeLLMService`` in a pipeline fed with synthesized speech frames), LiveKit
Agents 1.8.9 (``RealtimeModel`` session used directly, no room) and the OpenAI Agents SDK 0.24
(``RealtimeRunner``), each with its default settings, hold these cases as each does against OpenAI:

- a barge-in: the user talks over a playing reply, the client sends its ``conversation.item.truncate``;
  omnivox accepts it (no ``error``), the reply's audio stops, and the user's words get a second turn
  the client plays;
- a failed reply (the worker's LLM server is unreachable): one failed ``response.done``, no extra
  ``error`` event, and the client's session goes on;
- a missing item: ``conversation.item.retrieve`` is answered with OpenAI's code
  ``item_retrieve_invalid_item_id`` (which pipecat waits for) and the session goes on;
- default settings on the embedded default cascade: a spoken turn with no ``error`` events, no
  ``omnivox.*`` events, no ERROR logs from the client library, and the session alive.

And the plain ``openai`` SDK truncates a playing reply at its start, in its middle and past what
was sent (clamped to what was sent, not refused).

The clients' traffic goes through a recording relay (``wiretap``), so each test can say what the
client sent and what omnivox answered. Protocol cases use the echo LLM (the reply says "You said:
..."); the default-settings cases use the embedded default (Whisper and SmolLM2).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from cluster import ECHO_VOICE, EMBEDDED_VOICE, cluster, free_port
from realtime_clients import AgentsCall, LiveKitCall, PipecatCall, client_logs
from rtclient import Events, audio_of, client, silence, speech
from wiretap import WireTap

STORY = "tell me a long story about a brave little fox who lived in the forest by the river"
WEATHER = "what is the weather like in paris today"
KEY = "secret"


def turn(text: str) -> np.ndarray:
    """A spoken turn: a breath of silence, the words, then enough silence to end the turn."""
    return np.concatenate([silence(0.3), speech(text), silence(0.9)])


@pytest.fixture(scope="module")
def echo_cluster(tmp_path_factory):
    env = {"OMNIVOX_API_KEY": KEY, **ECHO_VOICE}
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("echo"), **env) as c:
        yield c


@pytest.fixture(scope="module")
def dead_llm_cluster(tmp_path_factory):
    """A worker whose LLM server (``--llm-url``) is a closed loopback port: every reply fails (with
    the spoken apology turned off: that is a completed reply, tested in test_realtime_dependencies)."""
    env = {
        "OMNIVOX_API_KEY": KEY,
        "OMNIVOX_LLM": "openai",
        "OMNIVOX_LLM_URL": f"http://127.0.0.1:{free_port()}/v1",
        "OMNIVOX_ASR": "pocketsphinx",
        "OMNIVOX_FAILURE_APOLOGY": "",
    }
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("dead"), **env) as c:
        yield c


@pytest.fixture(scope="module")
def embedded_cluster(tmp_path_factory):
    env = {"OMNIVOX_API_KEY": KEY, **EMBEDDED_VOICE}
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("embedded"), **env) as c:
        yield c


@pytest.fixture
def echo(echo_cluster):
    echo_cluster.wait_idle(1, timeout=15)  # the previous test's session may still be winding down
    return echo_cluster


@pytest.fixture
def dead_llm(dead_llm_cluster):
    dead_llm_cluster.wait_idle(1, timeout=15)
    return dead_llm_cluster


@pytest.fixture
def embedded(embedded_cluster):
    embedded_cluster.wait_idle(1, timeout=15)
    return embedded_cluster


# ---- what every case checks on the wire


def assert_no_error_events(tap: WireTap, case: str) -> None:
    errors = tap.errors()
    assert not errors, f"{case}: omnivox sent error events {errors}"


def assert_a_clean_turn(tap: WireTap, done: dict, case: str) -> None:
    """A completed reply, no error events, and none of omnivox's own events (stock clients do not know
    them, and the Agents SDK reports each as an error)."""
    assert_no_error_events(tap, case)
    assert not tap.extensions(), f"{case}: a stock client got omnivox's own events {tap.extensions()}"
    assert done["response"]["status"] == "completed", done["response"]


def assert_barge_in_was_accepted(tap: WireTap, reply_id: str, item_id: str) -> dict:
    """The client truncated the playing item; omnivox took it, stopped the reply's audio and ended it.
    Returns the ``conversation.item.truncated`` event."""
    sent = tap.sent("conversation.item.truncate", item_id=item_id)
    assert sent, f"the client sent no truncate of the playing item {item_id}; it sent {tap.types('client')}"
    assert_no_error_events(tap, f"the client's truncate {sent[0]}")
    # (omnivox may also have cut the item itself where its own barge-in paused it: the last one answers
    # the client)
    truncated = tap.received("conversation.item.truncated", item_id=item_id)
    assert truncated, f"no conversation.item.truncated for {item_id}; the server sent {tap.types()}"
    assert tap.when(truncated[-1]) > tap.when(sent[-1])
    assert truncated[-1]["audio_end_ms"] <= sent[-1]["audio_end_ms"], (truncated, sent)
    late = tap.audio_ms(reply_id, after=tap.when(truncated[-1]))
    assert late == 0, f"{late:.0f} ms of the reply's audio came after its truncation"
    done = tap.received("response.done", response__id=reply_id)
    assert done and done[0]["response"]["status"] == "cancelled", done
    return truncated[-1]


async def settled(awaitable: Any, timeout: float) -> tuple[Any, BaseException | None]:
    """What ``awaitable`` gave within ``timeout``, or what it raised (a TimeoutError when it never
    settled): a client's own round trip, checked after the wire, so a failure names its cause."""
    try:
        return await asyncio.wait_for(awaitable, timeout), None
    except Exception as exc:
        return None, exc


async def talk_over_a_reply(tap: WireTap, call: Any) -> tuple[str, str]:
    """The user asks for a long reply, lets it play for 1.5 s, then talks over it; returns once the
    turn after it has been answered, with the interrupted reply's response and item ids."""
    await tap.wait_for("session.updated")
    await call.say(turn(STORY), speed=3)
    first = await tap.wait_for("response.output_audio.delta", timeout=20)
    await asyncio.sleep(1.5)
    await call.say(turn(WEATHER))
    await tap.wait_for("response.done", count=2, timeout=20)
    return first["response_id"], first["item_id"]


async def one_spoken_turn(tap: WireTap, call: Any, speed: float = 3, timeout: float = 20) -> dict:
    """The user asks a question; returns the ``response.done`` that answers it."""
    await tap.wait_for("session.updated")
    await call.say(turn(WEATHER), speed=speed)
    return await tap.wait_for("response.done", timeout=timeout)


# ---- pipecat


async def test_pipecat_barge_in_is_accepted_and_a_second_turn_follows(echo):
    with client_logs() as logs:
        async with WireTap(echo.ws) as tap, PipecatCall(tap.ws, KEY) as call:
            reply_id, item_id = await talk_over_a_reply(tap, call)
            await asyncio.sleep(0.3)  # the last audio reaches the loudspeaker
            # pipecat still reads events: its retrieve of the cut item settles
            kept, failure = await settled(call.llm.retrieve_conversation_item(item_id), 5)

    truncated = assert_barge_in_was_accepted(tap, reply_id, item_id)
    second = tap.received("response.done")[1]["response"]
    assert second["status"] == "completed", second
    played = call.audio_ms_after(tap.when(truncated))
    assert played >= 1000, f"pipecat played {played:.0f} ms of the second reply (its session is dead?)"
    assert failure is None, f"pipecat's retrieve of the cut item failed: {failure!r}"
    heard = tap.received("conversation.item.input_audio_transcription.completed")[0]["transcript"]
    full, cut = f"You said: {heard}", kept.content[0].transcript
    assert cut and len(cut) < len(full) and full.startswith(cut.rsplit(" ", 1)[0]), (cut, full)
    assert not call.errors, f"pipecat pushed ErrorFrames: {[e.error for e in call.errors]}"
    assert not logs.errors, logs.errors


async def test_pipecat_a_failed_reply_is_one_failed_response_done(dead_llm):
    with client_logs() as logs:
        async with WireTap(dead_llm.ws) as tap, PipecatCall(tap.ws, KEY) as call:
            failed = await one_spoken_turn(tap, call)
            await asyncio.sleep(0.5)  # room for anything that would follow it
            user_item = tap.received("input_audio_buffer.committed")[0]["item_id"]
            # pipecat still reads events: its retrieve settles
            _, failure = await settled(call.llm.retrieve_conversation_item(user_item), 5)

    assert failed["response"]["status"] == "failed", failed["response"]
    assert failed["response"]["status_details"]["error"]["type"] == "server_error"
    assert_no_error_events(tap, "after a failed response.done")
    assert len(tap.received("response.done")) == 1
    assert failure is None, f"pipecat stopped reading events after the failed reply: {failure!r}"
    # pipecat reports the failed response.done itself, once (an ErrorFrame, and its log line)
    assert len(call.errors) == 1, [e.error for e in call.errors]
    assert len(logs.errors) == 1, logs.errors


async def test_pipecat_retrieving_a_missing_item_fails_that_retrieve_only(echo):
    with client_logs() as logs:
        async with WireTap(echo.ws) as tap, PipecatCall(tap.ws, KEY) as call:
            await tap.wait_for("session.updated")
            item, refused = await settled(call.llm.retrieve_conversation_item("item_missing"), 5)
            # the session goes on: a spoken turn gets a reply pipecat plays
            await call.say(turn(WEATHER), speed=3)
            await tap.wait_for("response.done", timeout=20)
            await asyncio.sleep(0.3)

    assert [(e["code"], e["event_id"]) for e in tap.errors()] == [
        ("item_retrieve_invalid_item_id", "rci_item_missing")
    ]
    assert item is None, f"a missing item was retrieved: {item}"
    # pipecat fails that retrieve with the server's message (it never settles on another code)
    assert refused is not None and not isinstance(refused, TimeoutError), repr(refused)
    assert call.speaker.total_ms >= 1000, f"pipecat played {call.speaker.total_ms:.0f} ms after the retrieve"
    assert not call.errors, f"pipecat pushed ErrorFrames: {[e.error for e in call.errors]}"
    assert not logs.errors, logs.errors


async def test_pipecat_default_settings_hold_a_spoken_turn_cleanly(embedded):
    with client_logs() as logs:
        async with WireTap(embedded.ws) as tap, PipecatCall(tap.ws, KEY) as call:
            done = await one_spoken_turn(tap, call, speed=2, timeout=40)
            await asyncio.sleep(0.3)
            user_item = tap.received("input_audio_buffer.committed")[0]["item_id"]
            item, failure = await settled(call.llm.retrieve_conversation_item(user_item), 5)

    assert_a_clean_turn(tap, done, "pipecat's default session")
    assert call.speaker.total_ms >= 500
    assert failure is None and item.id == user_item, f"pipecat's retrieve failed: {failure!r}"
    assert not call.errors, f"pipecat pushed ErrorFrames: {[e.error for e in call.errors]}"
    assert not logs.errors, logs.errors


# ---- LiveKit Agents


async def test_livekit_barge_in_is_accepted_and_a_second_turn_follows(echo):
    with client_logs() as logs:
        async with WireTap(echo.ws) as tap, LiveKitCall(tap.http, KEY) as call:
            reply_id, item_id = await talk_over_a_reply(tap, call)
            await asyncio.sleep(0.3)

    assert call.truncations and call.truncations[0][0] == item_id, call.truncations
    assert_barge_in_was_accepted(tap, reply_id, item_id)
    done = tap.received("response.done")[1]["response"]
    assert done["status"] == "completed", done
    second = [g for g in call.generations if g.response_id == done["id"]]
    assert second and second[0].done.is_set(), "LiveKit never played the second reply"
    assert second[0].audio_ms >= 1000, f"LiveKit played {second[0].audio_ms:.0f} ms of the second reply"
    assert not call.errors, f"LiveKit emitted errors: {[e.error for e in call.errors]}"
    assert not logs.errors, logs.errors


async def test_livekit_a_failed_reply_leaves_no_empty_message_and_no_error_event(dead_llm):
    with client_logs() as logs:
        async with WireTap(dead_llm.ws) as tap, LiveKitCall(tap.http, KEY) as call:
            await one_spoken_turn(tap, call)
            await asyncio.sleep(0.5)
            # the session goes on: a reply asked for is created (and fails the same way)
            _, failure = await settled(call.session.generate_reply(), 10)
            await tap.wait_for("response.done", count=2, timeout=20)
            await asyncio.sleep(0.5)
            context = call.session.chat_ctx

    assert [d["response"]["status"] for d in tap.received("response.done")] == ["failed", "failed"]
    assert_no_error_events(tap, "after failed replies")
    assert failure is None, f"LiveKit's generate_reply after the failed reply: {failure!r}"
    # LiveKit reports each failed response.done itself, as a recoverable error
    assert [e.recoverable for e in call.errors] == [True, True], [e.error for e in call.errors]
    assert not logs.errors, logs.errors
    empty = [
        m.id for m in context.items if m.type == "message" and m.role == "assistant" and not m.text_content
    ]
    assert not empty, f"the failed replies left empty assistant messages in LiveKit's context: {empty}"


async def test_livekit_retrieving_a_missing_item_is_a_recoverable_error(echo):
    from livekit.agents import llm

    with client_logs():
        async with WireTap(echo.ws) as tap, LiveKitCall(tap.http, KEY) as call:
            await tap.wait_for("session.updated")
            call.session.send_event(
                {
                    "type": "conversation.item.retrieve",
                    "item_id": "item_missing",
                    "event_id": "retrieve_missing",
                }
            )
            await tap.wait_for("error", timeout=5)
            # the session goes on: a typed message and a reply to it
            ctx = call.session.chat_ctx.copy()
            ctx.add_message(role="user", content="one two three four five")
            _, failure = await settled(call.session.update_chat_ctx(ctx), 5)
            generation, failure = (
                (None, failure) if failure else await settled(call.session.generate_reply(), 10)
            )
            if generation is not None:
                await tap.wait_for("response.done", response__id=generation.response_id, timeout=20)
                await asyncio.sleep(0.3)

    assert [(e["code"], e["event_id"]) for e in tap.errors()] == [
        ("item_retrieve_invalid_item_id", "retrieve_missing")
    ]
    assert [e.recoverable for e in call.errors] == [True]
    assert isinstance(call.errors[0], llm.RealtimeModelError)
    assert failure is None, f"LiveKit's session after the error: {failure!r}"
    reply = next(g for g in call.generations if g.response_id == generation.response_id)
    assert reply.audio_ms >= 1000 and "one two three" in reply.text, (reply.audio_ms, reply.text)


async def test_livekit_default_settings_hold_a_spoken_turn_cleanly(embedded):
    with client_logs() as logs:
        async with WireTap(embedded.ws) as tap, LiveKitCall(tap.http, KEY) as call:
            done = await one_spoken_turn(tap, call, speed=2, timeout=40)
            await asyncio.sleep(0.3)
            # the session goes on: LiveKit adds a message and hears it was added
            ctx = call.session.chat_ctx.copy()
            ctx.add_message(role="user", content="thank you")
            _, failure = await settled(call.session.update_chat_ctx(ctx), 5)

    assert_a_clean_turn(tap, done, "LiveKit's default session")
    assert call.generations and call.generations[0].audio_ms >= 500
    assert failure is None, f"LiveKit's update_chat_ctx after the turn: {failure!r}"
    assert not call.errors, f"LiveKit emitted errors: {[e.error for e in call.errors]}"
    assert not logs.errors, logs.errors


# ---- the OpenAI Agents SDK


async def test_agents_sdk_barge_in_is_accepted_and_a_second_turn_follows(echo):
    with client_logs() as logs:
        async with WireTap(echo.ws) as tap, AgentsCall(tap.ws, KEY) as call:
            reply_id, item_id = await talk_over_a_reply(tap, call)
            second = tap.received("response.done")[1]
            await settled(call.wait_for("agent_end", count=2), 5)

    assert call.of("audio_interrupted"), "the Agents SDK never stopped playing the first reply"
    assert_barge_in_was_accepted(tap, reply_id, item_id)
    assert second["response"]["status"] == "completed", second["response"]
    second_item = second["response"]["output"][0]["id"]
    played = sum(len(e.audio.data) for e in call.of("audio") if e.item_id == second_item) / 48
    assert played >= 1000, f"the Agents SDK got {played:.0f} ms of the second reply"
    assert not call.errors(), f"the Agents SDK reported errors: {[e.error for e in call.errors()]}"
    assert not logs.errors, logs.errors


async def test_agents_sdk_a_failed_reply_is_no_error_event(dead_llm):
    with client_logs() as logs:
        async with WireTap(dead_llm.ws) as tap, AgentsCall(tap.ws, KEY) as call:
            await one_spoken_turn(tap, call)
            await settled(call.wait_for("agent_end"), 5)
            # the session goes on: a typed message gets its (failed) reply too
            await call.session.send_message("hello there")
            await tap.wait_for("response.done", count=2, timeout=20)
            _, failure = await settled(call.wait_for("agent_end", count=2), 5)

    assert [d["response"]["status"] for d in tap.received("response.done")] == ["failed", "failed"]
    assert_no_error_events(tap, "after failed replies")
    assert failure is None, f"the Agents SDK session after the failed reply: {failure}"
    assert not call.errors(), f"the Agents SDK reported errors: {[e.error for e in call.errors()]}"
    assert not logs.errors, logs.errors


async def test_agents_sdk_retrieving_a_missing_item_is_an_error_with_openais_code(echo):
    from agents.realtime.model_inputs import RealtimeModelSendRawMessage

    async with WireTap(echo.ws) as tap, AgentsCall(tap.ws, KEY) as call:
        await tap.wait_for("session.updated")
        await call.session.model.send_event(
            RealtimeModelSendRawMessage(
                message={"type": "conversation.item.retrieve", "other_data": {"item_id": "item_missing"}}
            )
        )
        await tap.wait_for("error", timeout=5)
        await asyncio.sleep(0.3)
        # the session goes on: a typed message gets a spoken reply
        await call.session.send_message("one two three four five")
        done = await tap.wait_for("response.done", timeout=20)
        _, failure = await settled(call.wait_for("agent_end"), 5)

    assert [e["code"] for e in tap.errors()] == ["item_retrieve_invalid_item_id"]
    reported = [getattr(e.error, "code", e.error) for e in call.errors()]
    assert reported == ["item_retrieve_invalid_item_id"], reported
    assert failure is None, f"the Agents SDK session after the error: {failure}"
    assert done["response"]["status"] == "completed" and call.of("audio")


async def test_agents_sdk_default_settings_hold_a_spoken_turn_cleanly(embedded):
    with client_logs() as logs:
        async with WireTap(embedded.ws) as tap, AgentsCall(tap.ws, KEY) as call:
            done = await one_spoken_turn(tap, call, speed=2, timeout=40)
            _, failure = await settled(call.wait_for("agent_end"), 5)
            await asyncio.sleep(0.5)  # the SDK's own retrieves after the turn are answered

    assert_a_clean_turn(tap, done, "the Agents SDK's default session")
    assert failure is None and call.of("audio") and call.closed is None, failure
    assert not call.errors(), f"the Agents SDK reported errors: {[e.error for e in call.errors()]}"
    assert not logs.errors, logs.errors


# ---- the plain openai SDK: truncating a playing reply


@pytest.mark.parametrize("point", ["start", "middle", "past_what_was_sent"])
async def test_openai_sdk_truncates_a_playing_reply(echo, point):
    async with client(echo.ws, KEY).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await conn.session.update(session={"type": "realtime", "audio": {"input": {"turn_detection": None}}})
        await events.wait_for("session.updated")
        await conn.conversation.item.create(
            item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": STORY}]}
        )
        await conn.response.create()
        first = await events.wait_for("response.output_audio.delta")
        reply_id, item_id = first.response_id, first.item_id
        if point != "start":  # the repro: 1500 ms of audio received, then cut
            deltas = 1
            while len(audio_of(events, reply_id)) < 1.5 * 24000:
                deltas += 1
                await events.wait_for("response.output_audio.delta", count=deltas, timeout=5)
        received_ms = len(audio_of(events, reply_id)) * 1000 / 24000
        asked = {"start": 0, "middle": 1000, "past_what_was_sent": int(received_ms) + 500}[point]
        await conn.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=asked)
        done = await events.wait_for("response.done", response__id=reply_id, timeout=10)
        await conn.conversation.item.retrieve(item_id=item_id)
        retrieved = await events.wait_for("conversation.item.retrieved", timeout=5)
        await events.stop()

    errors = [e.error for e in events.of("error")]
    assert not errors, f"truncate at {asked} ms (after {received_ms:.0f} ms received) was refused: {errors}"
    truncated = events.of("conversation.item.truncated")
    answered = [(t.item_id, t.audio_end_ms) for t in truncated]
    assert len(truncated) == 1 and truncated[0].item_id == item_id, (
        f"one truncate of {item_id} at {asked} ms was answered with conversation.item.truncated {answered}"
    )
    sent_ms = len(audio_of(events, reply_id)) * 1000 / 24000  # all the reply's audio ever sent
    if point == "past_what_was_sent":  # clamped to what was sent
        assert received_ms <= truncated[0].audio_end_ms <= sent_ms + 1, (received_ms, truncated[0], sent_ms)
    else:
        assert truncated[0].audio_end_ms == asked
    # the reply's audio stopped at once: none after the truncation, and little more than was received
    truncated_at = next(t for t, e in events.seen if e is truncated[0])
    late = [
        e
        for t, e in events.seen
        if t > truncated_at and getattr(e, "delta", None) and e.type.endswith("audio.delta")
    ]
    assert not late, f"{len(late)} audio deltas came after the truncation"
    assert sent_ms <= received_ms + 1000, (sent_ms, received_ms)
    assert done.response.status == "cancelled", done.response
    # the item keeps only what was heard
    full = f"You said: {STORY}"
    kept = retrieved.item.content[0].transcript
    if point == "start":
        assert kept == "", kept
    else:
        assert kept and len(kept) < len(full) and full.startswith(kept.rsplit(" ", 1)[0]), kept
