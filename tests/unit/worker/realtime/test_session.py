"""A realtime session on the session runtime with a fake voice engine: the wiring of its parts."""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np
import pytest

from fake_voice_engine import FakeVoiceEngine
from memsocket import MemorySocket
from omnivox.audio.pcm import to_pcm16
from omnivox.connection.runtime import Connection
from omnivox.core.config import Settings
from omnivox.protocol.realtime.wire import REALTIME
from omnivox.voice.listener import Heard
from omnivox.worker.handler import SessionInfo
from omnivox.worker.realtime.session import RealtimeSession

CHUNK = base64.b64encode(to_pcm16(np.zeros(2400, np.float32))).decode()  # 100 ms at 24 kHz


@dataclass
class Host:
    engine: FakeVoiceEngine


class Client:
    """The test's side of the socket: send client events, read server events by type."""

    def __init__(self, socket: MemorySocket) -> None:
        self.socket = socket
        self.read = 0

    def send(self, type: str, **fields) -> None:
        self.socket.feed(json.dumps({"type": type, **fields}))

    def append(self, n: int = 1) -> None:
        for _ in range(n):
            self.send("input_audio_buffer.append", audio=CHUNK)

    async def until(self, type: str, timeout: float = 3.0) -> list[dict]:
        """Events up to and including the next one of ``type``."""
        out = []
        async with asyncio.timeout(timeout):
            while True:
                while self.read >= len(self.socket.sent):
                    self.socket.wrote.clear()
                    await self.socket.wrote.wait()
                event = json.loads(self.socket.sent[self.read])
                self.read += 1
                out.append(event)
                if event["type"] == type:
                    return out


@pytest.fixture
async def session(request) -> AsyncIterator[tuple[Client, FakeVoiceEngine, RealtimeSession]]:
    script, hold, *rest = getattr(request, "param", ([], False))
    query = rest[0] if rest else {"omnivox_events": "true"}  # omnivox's own events too, unless said
    engine = FakeVoiceEngine(script, hold=hold)
    socket = MemorySocket()
    conn = Connection(socket, REALTIME)
    info = SessionInfo("s1", query=query)
    handler = RealtimeSession(conn, Host(engine), Settings(audio_lead_ms=5000), info)  # type: ignore[arg-type]
    running = asyncio.create_task(conn.run(handler.on_frame, handler.main()))
    client = Client(socket)
    await client.until("session.created")
    yield client, engine, handler
    socket.hang_up()
    await asyncio.wait_for(running, 5)
    await handler.close()


def types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


TURN = [
    [Heard("speech_started", 100.0)],
    [Heard("speech_confirmed", 250.0), Heard("partial", 300.0, "what")],
    [Heard("partial", 400.0, "what time")],
    [Heard("speech_stopped", 900.0), Heard("final", 1400.0, "what time is it")],
]


@pytest.mark.parametrize("session", [(TURN, False)], indirect=True)
async def test_a_spoken_turn_is_committed_and_answered(session) -> None:
    client, engine, _ = session
    client.append(4)
    events = await client.until("response.done")
    order = types(events)
    for a, b in [
        ("input_audio_buffer.speech_started", "conversation.item.input_audio_transcription.delta"),
        ("conversation.item.input_audio_transcription.delta", "input_audio_buffer.speech_stopped"),
        ("input_audio_buffer.speech_stopped", "input_audio_buffer.committed"),
        ("input_audio_buffer.committed", "conversation.item.input_audio_transcription.completed"),
        ("conversation.item.input_audio_transcription.completed", "response.created"),
        ("response.created", "response.output_audio.delta"),
    ]:
        assert order.index(a) < order.index(b), (a, b, order)
    completed = next(e for e in events if e["type"].endswith("transcription.completed"))
    assert completed["transcript"] == "what time is it"
    assert engine.asked == ["what time is it"]
    done = events[-1]["response"]
    assert done["status"] == "completed"
    assert done["output"][0]["content"][0]["transcript"] == "Reply to: what time is it. And more."


@pytest.mark.parametrize("session", [(TURN, False)], indirect=True)
async def test_a_reply_ends_with_its_breakdown_for_a_client_that_asked(session) -> None:
    client, _, _ = session
    client.append(4)
    done = (await client.until("response.done"))[-1]
    breakdown = (await client.until("omnivox.turn.breakdown"))[-1]
    assert breakdown["response_id"] == done["response"]["id"]
    stages = breakdown["stages_ms"]
    assert {"noticed", "decided", "transcribed", "first_audio_sent"} <= set(stages)
    assert stages["decided"] <= stages["transcribed"]  # the ASR's flush follows the turn's end


BARGE_IN = [
    *TURN,
    [],  # the reply is speaking
    [Heard("speech_started", 2000.0)],
    [Heard("speech_confirmed", 2150.0)],  # the reply pauses
    [Heard("partial", 2400.0, "wait a moment")],  # words: a real barge-in
]


@pytest.mark.parametrize("session", [(BARGE_IN, True)], indirect=True)
async def test_speech_over_the_reply_pauses_it_then_words_cancel_and_truncate_it(session) -> None:
    client, engine, handler = session
    client.append(4)
    await client.until("response.output_audio.delta")
    client.append(4)
    events = await client.until("response.done")
    done = events[-1]["response"]
    assert done["status"] == "cancelled" and done["status_details"]["reason"] == "turn_detected"
    paused = next(e for e in events if e["type"] == "omnivox.interruption.paused")
    truncated = next(e for e in events if e["type"] == "conversation.item.truncated")
    assert truncated["audio_end_ms"] == paused["audio_end_ms"]  # cut where it paused
    assert "omnivox.interruption.resumed" not in types(events)
    await asyncio.to_thread(engine.stopped.wait, 2)  # the engine's reply was told to stop
    # the response lets go of the floor once its thread has ended (response.done can come first)
    for _ in range(200):
        if not handler.agent.replying:
            break
        await asyncio.sleep(0.01)
    assert not handler.agent.replying


BARGE_IN_AT_THE_END = [
    *TURN,
    [Heard("speech_started", 1500.0)],  # the reply has said everything: its audio plays out
    [Heard("speech_confirmed", 2650.0)],
    [Heard("partial", 2700.0, "wait a moment")],
]


@pytest.mark.parametrize("session", [(BARGE_IN_AT_THE_END, False)], indirect=True)
async def test_speech_over_a_reply_that_said_everything_pauses_its_player_then_truncates_it(session) -> None:
    client, _, _ = session
    client.append(4)
    done = (await client.until("response.done"))[-1]["response"]
    assert done["status"] == "completed"
    client.append(3)
    events = await client.until("conversation.item.truncated")
    # the player hears the pause at once (before the words are judged), then the cut
    paused = next(e for e in events if e["type"] == "omnivox.interruption.paused")
    assert paused["response_id"] == done["id"] and paused["item_id"] == done["output"][0]["id"]
    order = types(events)
    assert order.index("omnivox.interruption.paused") < order.index("omnivox.interruption.judged")
    assert events[-1]["item_id"] == done["output"][0]["id"]


PAUSE = [
    [Heard("speech_started", 100.0)],
    [Heard("pause", 800.0, "call my")],  # a reply is prepared, held
    [Heard("resumed", 900.0)],  # the user goes on: it is dropped unheard
    [Heard("speech_stopped", 1500.0), Heard("final", 2000.0, "call my sister")],
]


@pytest.mark.parametrize("session", [(PAUSE, False)], indirect=True)
async def test_a_pause_that_is_not_the_end_of_the_turn_drops_the_prepared_reply(session) -> None:
    client, engine, _ = session
    client.append(4)
    events = await client.until("response.done")
    assert types(events).count("response.created") == 1
    transcript = events[-1]["response"]["output"][0]["content"][0]["transcript"]
    assert transcript.startswith("Reply to: call my sister")
    assert engine.asked[-1] == "call my sister" and "call my" in engine.asked  # prepared, then dropped


PREPARED = [
    [Heard("speech_started", 100.0)],
    [Heard("pause", 800.0, "good morning")],
    [Heard("speech_stopped", 1200.0), Heard("final", 1500.0, "good morning")],
]


@pytest.mark.parametrize("session", [(PREPARED, False)], indirect=True)
async def test_a_reply_prepared_in_the_pause_is_the_one_said(session) -> None:
    client, engine, _ = session
    client.append(3)
    events = await client.until("response.done")
    assert engine.asked == ["good morning"]  # prepared once, released, never asked again
    assert types(events).count("response.created") == 1
    # the user item comes before the assistant item in the conversation
    added = [e["item"]["role"] for e in events if e["type"] == "conversation.item.added"]
    assert added == ["user", "assistant"]


async def test_manual_turns_commit_then_respond_on_request(session) -> None:
    client, engine, _ = session
    client.send("session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": None}}})
    await client.until("session.updated")
    client.append(2)
    client.send("input_audio_buffer.commit")
    events = await client.until("conversation.item.done")
    assert "input_audio_buffer.committed" in types(events)
    assert events[-1]["item"]["content"][0]["transcript"] == "typed by hand"
    client.send("response.create", response={"output_modalities": ["text"]})
    events = await client.until("response.done")
    assert "response.output_text.delta" in types(events) and "response.output_audio.delta" not in types(
        events
    )
    assert engine.asked == ["typed by hand"]
    assert engine.listener.configured == [None]  # the listener was told: manual turns


async def test_errors_name_the_event_that_caused_them_and_the_session_goes_on(session) -> None:
    client, _, _ = session
    client.send("response.cancel", event_id="evt_7")
    error = (await client.until("error"))[-1]["error"]
    assert (error["code"], error["event_id"]) == ("response_cancel_not_active", "evt_7")
    client.send("input_audio_buffer.commit", event_id="evt_8")
    error = (await client.until("error"))[-1]["error"]
    assert (error["code"], error["event_id"]) == ("input_audio_buffer_commit_empty", "evt_8")
    client.send("conversation.item.retrieve", item_id="nope", event_id="evt_9")
    error = (await client.until("error"))[-1]["error"]
    assert (error["code"], error["param"]) == ("item_retrieve_invalid_item_id", "item_id")
    client.send("no.such.event", event_id="evt_10")
    error = (await client.until("error"))[-1]["error"]
    assert (error["code"], error["event_id"]) == ("invalid_event", "evt_10")
    client.send(
        "conversation.item.create",
        item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    )
    assert (await client.until("conversation.item.done"))[-1]["item"]["content"][0]["text"] == "hi"


async def test_items_are_created_retrieved_truncated_checked_and_deleted(session) -> None:
    client, _, handler = session
    client.send(
        "conversation.item.create",
        item={
            "id": "u1",
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "one"}],
        },
    )
    await client.until("conversation.item.done")
    client.send("conversation.item.retrieve", item_id="u1")
    got = (await client.until("conversation.item.retrieved"))[-1]
    assert got["item"]["id"] == "u1"
    client.send("conversation.item.truncate", item_id="u1", audio_end_ms=0)
    error = (await client.until("error"))[-1]["error"]
    assert error["param"] == "item_id"  # only assistant audio can be truncated
    client.send("conversation.item.delete", item_id="u1")
    assert (await client.until("conversation.item.deleted"))[-1]["item_id"] == "u1"
    assert len(handler.conversation) == 0


async def test_an_unknown_voice_falls_back_to_the_default_and_clear_empties_the_buffer(session) -> None:
    client, engine, _ = session
    client.send("session.update", session={"type": "realtime", "audio": {"output": {"voice": "alloy"}}})
    updated = (await client.until("session.updated"))[-1]
    assert updated["session"]["audio"]["output"]["voice"] == "v1"
    client.send("session.update", session={"type": "realtime", "audio": {"output": {"voice": "v2"}}})
    assert (await client.until("session.updated"))[-1]["session"]["audio"]["output"]["voice"] == "v2"
    client.append()
    client.send("input_audio_buffer.clear")
    await client.until("input_audio_buffer.cleared")
    assert engine.listener.cleared == 1


@pytest.mark.parametrize("session", [([], True)], indirect=True)
async def test_a_client_truncates_a_reply_while_it_plays_and_it_stops_there(session) -> None:
    """What pipecat, LiveKit and the Agents SDK send when the user talks over a reply."""
    client, engine, handler = session
    client.send(
        "conversation.item.create",
        item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]},
    )
    client.send("response.create")
    delta = (await client.until("response.output_audio.delta"))[-1]
    client.send("conversation.item.truncate", item_id=delta["item_id"], content_index=0, audio_end_ms=60)
    events = await client.until("response.done")
    assert "error" not in types(events)
    truncated = next(e for e in events if e["type"] == "conversation.item.truncated")
    assert (truncated["item_id"], truncated["audio_end_ms"]) == (delta["item_id"], 60)
    assert events[-1]["response"]["status"] == "cancelled"
    await asyncio.to_thread(engine.stopped.wait, 2)  # the reply's audio stopped at once
    item = handler.conversation.get(delta["item_id"])
    assert item.audio_ms == 60 and item.status == "incomplete"
    # the LLM is given only what was heard: the first 60 of 100 ms of "Reply to: go on."
    assert [m.content for m in handler.conversation.messages("")][-1] == "Reply to: go"


async def test_a_failed_reply_is_one_failed_response_done_and_no_error_event(session) -> None:
    from omnivox.core.errors import EngineFailure

    client, engine, _ = session
    engine.fail = EngineFailure("the LLM server is unreachable")
    client.send("response.create", response={"output_modalities": ["text"]})
    events = await client.until("response.done")
    done = events[-1]["response"]
    assert done["status"] == "failed" and done["status_details"]["error"]["code"] == "engine_error"
    assert "error" not in types(events)
    engine.fail = None
    client.send("response.create", response={"output_modalities": ["text"]})
    events = await client.until("response.done")  # the session goes on
    assert "error" not in types(events) and events[-1]["response"]["status"] == "completed"


@pytest.mark.parametrize("session", [([], False, {})], indirect=True)
async def test_a_stock_client_gets_no_omnivox_events_and_the_settings_in_effect(session, caplog) -> None:
    client, _, _ = session
    with caplog.at_level("INFO", logger="omnivox.worker.realtime.session"):
        client.send(
            "session.update",
            session={
                "type": "realtime",
                "audio": {
                    "output": {"voice": "alloy"},
                    "input": {"transcription": {"model": "gpt-4o-mini-transcribe"}},
                },
                "tracing": "auto",
            },
        )
        updated = (await client.until("session.updated"))[-1]["session"]
        client.send("response.cancel")  # something after it, to read past any warning
        events = await client.until("error")
    assert not [e for e in events if e["type"].startswith("omnivox.")]
    assert updated["audio"]["output"]["voice"] == "v1"  # the voice that speaks, not the one asked
    assert updated["audio"]["input"]["transcription"]["model"] == "default"  # the one that transcribes
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "alloy" in said and "traces" in said  # each told in the log instead


TWO_TURNS_AT_ONCE = [
    [Heard("speech_started", 100.0)],
    [Heard("speech_stopped", 900.0), Heard("final", 1000.0, "first question")],
    [],
    [Heard("speech_started", 1300.0)],
    [Heard("speech_stopped", 1900.0), Heard("final", 2000.0, "second question")],
    [],
    [],
    [],
    [],
    [],
]


@pytest.mark.parametrize("session", [(TWO_TURNS_AT_ONCE, False)], indirect=True)
async def test_audio_held_while_waiting_is_not_answered_turn_by_turn_as_it_is_heard_at_once(session) -> None:
    """A second of speech held by the gateway arrives in one burst: answering the first question the
    moment it is heard would be cut by the second, heard a moment later. One reply, to both."""
    client, engine, handler = session
    client.append(10)  # faster than real time
    events = await client.until("response.done")
    assert types(events).count("input_audio_buffer.committed") == 2
    assert types(events).count("response.created") == 1
    assert engine.asked == ["second question"]  # the reply sees both turns
    assert [m.content for m in handler.conversation.messages("")][:2] == ["first question", "second question"]
    assert events[-1]["response"]["status"] == "completed"


def test_what_the_agent_heard_is_worded_as_openai_events() -> None:
    from omnivox.agent.events import InputCleared, SpeechStarted, SpeechStopped, TranscriptDelta
    from omnivox.worker.realtime.session import hearing_event

    started = hearing_event(SpeechStarted("item_1", 1200.7))
    assert (started.type, started.audio_start_ms, started.item_id) == (
        "input_audio_buffer.speech_started",
        1200,
        "item_1",
    )
    stopped = hearing_event(SpeechStopped("item_1", 2000.2))
    assert (stopped.type, stopped.audio_end_ms, stopped.item_id) == (
        "input_audio_buffer.speech_stopped",
        2000,
        "item_1",
    )
    delta = hearing_event(TranscriptDelta("item_1", " more"))
    assert (delta.type, delta.item_id, delta.delta) == (
        "conversation.item.input_audio_transcription.delta",
        "item_1",
        " more",
    )
    assert hearing_event(InputCleared()).type == "input_audio_buffer.cleared"


async def test_an_engine_without_voice_models_is_refused_as_unavailable() -> None:
    from omnivox.core.errors import WorkerUnavailable
    from omnivox.engines.echo import EchoEngine

    conn = Connection(MemorySocket(), REALTIME)
    with pytest.raises(WorkerUnavailable) as info:
        RealtimeSession(conn, Host(EchoEngine()), Settings(), SessionInfo("s1"))  # type: ignore[arg-type]
    assert info.value.code == "no_capable_worker" and "echo" in info.value.message


@pytest.mark.parametrize("kind", ["near_field", "far_field"])
def test_noise_reduction_is_served_and_reaches_the_agent(kind):
    from omnivox.agent.hearing import Denoise
    from omnivox.protocol.realtime.session_config import SessionConfig, apply_update
    from omnivox.worker.realtime.session import agent_settings

    cfg = apply_update(SessionConfig(), {"audio": {"input": {"noise_reduction": {"type": kind}}}})
    assert agent_settings(cfg).noise == Denoise(kind)
    off = apply_update(cfg, {"audio": {"input": {"noise_reduction": None}}})
    assert agent_settings(off).noise == Denoise(None)


def test_the_judge_weighs_the_backchannel_witness_on_a_wideband_line_only():
    from omnivox.agent.interruption import Line
    from omnivox.core.errors import InvalidMessage
    from omnivox.protocol.realtime.session_config import SessionConfig, apply_update
    from omnivox.worker.realtime.session import agent_settings

    wide = SessionConfig()  # a WebSocket or WebRTC client's microphone
    assert agent_settings(wide).interruption.line is Line.WIDEBAND
    assert agent_settings(wide).interruption.weighs_witness
    # a phone call's session, as the gateway's preamble sets it (protocol.realtime.phone)
    phone = apply_update(wide, {"omnivox": {"line": "phone"}})
    assert agent_settings(phone).interruption.line is Line.PHONE
    assert not agent_settings(phone).interruption.weighs_witness
    # other options leave the line as it is
    assert apply_update(phone, {"omnivox": {"echo_guard": False}}).omnivox.line == "phone"
    with pytest.raises(InvalidMessage) as info:
        apply_update(wide, {"omnivox": {"line": "g711"}})
    assert info.value.details["param"] == "session.omnivox.line"


@pytest.mark.parametrize("fmt", ["audio/pcmu", "audio/pcma"])
def test_a_g711_input_is_a_phone_line_unless_the_session_says_otherwise(fmt):
    from omnivox.agent.interruption import Line
    from omnivox.protocol.realtime.session_config import SessionConfig, apply_update
    from omnivox.worker.realtime.session import agent_settings

    g711 = apply_update(SessionConfig(), {"audio": {"input": {"format": {"type": fmt}}}})
    assert g711.omnivox.line is None
    assert agent_settings(g711).interruption.line is Line.PHONE  # a client bridging its own calls
    said = apply_update(g711, {"omnivox": {"line": "wideband"}})
    assert agent_settings(said).interruption.line is Line.WIDEBAND  # its word is taken
    opus = apply_update(SessionConfig(), {"audio": {"input": {"format": {"type": "audio/opus"}}}})
    assert agent_settings(opus).interruption.line is Line.WIDEBAND


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


async def test_images_for_an_llm_that_cannot_see_are_kept_and_said_once(session) -> None:
    client, _, handler = session
    image = {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}
    seen: list[dict] = []
    for _ in range(2):
        client.send("conversation.item.create", item={"type": "message", "role": "user", "content": [image]})
        seen += await client.until("conversation.item.done")
        assert seen[-1]["item"]["content"][-1] == image  # the item keeps it
    client.send("response.cancel")  # something after them, to read past any warning
    seen += await client.until("error")
    warned = [e for e in seen if e["type"] == "omnivox.warning"]
    assert [w["param"] for w in warned] == ["item.content"]  # said once, for the first
    assert "cannot see images" in warned[0]["message"]
    bad = {"type": "input_image", "image_url": "https://example.com/cat.png"}
    client.send("conversation.item.create", item={"type": "message", "role": "user", "content": [bad]})
    err = (await client.until("error"))[-1]
    assert err["error"]["param"] == "item.content.0.image_url"
    assert len(handler.conversation) == 2


async def test_a_session_that_ended_frees_its_input_resampler() -> None:
    engine = FakeVoiceEngine([])
    socket = MemorySocket()
    conn = Connection(socket, REALTIME)
    handler = RealtimeSession(conn, Host(engine), Settings(), SessionInfo("s1"))  # type: ignore[arg-type]
    running = asyncio.create_task(conn.run(handler.on_frame, handler.main()))
    client = Client(socket)
    await client.until("session.created")
    client.append(3)  # the decoder's stream has state (the resampler's held-back samples)
    client.send("input_audio_buffer.commit")
    await client.until("input_audio_buffer.committed")
    resampler = weakref.ref(handler.decoder._resampler)
    socket.hang_up()
    await asyncio.wait_for(running, 5)
    await handler.close()
    del handler, conn, running, client
    gc.collect()
    assert resampler() is None  # nothing (a cache, a thread, a callback) keeps an ended stream
