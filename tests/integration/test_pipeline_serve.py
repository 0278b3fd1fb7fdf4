"""``omnivox serve --pipeline cascade``: real conversations with the coordinator and every stage in
processes of their own, shared by light workers (issue 15). Echo LLM (the reply says what was
heard), Whisper and hibari on the stages."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator

import numpy as np
import pytest
import websockets

from dxclient import DuplexClient, seconds
from omnivox.audio.pcm import to_pcm16
from omnivox.audio.resample import resample
from pipeline_served import AUTH, KEY, Served

from ..rtclient import Events, client, silence, speech, stream


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    # a stopped stage is written off only when it dies (its heartbeats: the fault tests)
    s = Served(tmp_path_factory.mktemp("pipeline-serve"), env={"OMNIVOX_PIPELINE_LOST_AFTER_S": "30"})
    try:
        s.wait(s.ready)
        yield s
    finally:
        s.stop()


async def talk(served: Served, text: str) -> Events:
    async with client(served.ws, KEY).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        await stream(conn, np.concatenate([silence(0.3), speech(text), silence(1.0)]), speed=0)
        await events.wait_for("response.done", timeout=60)
        await events.stop()
    return events


async def test_a_realtime_conversation_runs_on_the_stages(served) -> None:
    events = await talk(served, "Please remind me to call my sister.")
    heard = events.of("conversation.item.input_audio_transcription.completed")[0].transcript
    assert "sister" in heard.lower()
    reply = events.of("response.output_audio_transcript.done")[0].transcript
    assert reply.startswith("You said") and "sister" in reply.lower()
    assert events.of("response.output_audio.delta")
    view = served.stages()
    loads = {s["name"]: s["load"] for s in view["stages"]}
    assert loads["asr"]["decode_calls"] >= 1 and loads["tts"]["sentences"] >= 1
    served.wait(lambda h: h["pipeline"]["session_slots_used"] == 0 and h["workers_idle"] >= 2)


async def test_a_streaming_turn_transcribes_and_speaks_through_the_stages(served) -> None:
    audio = resample(speech("What is the weather like today?"), 24000, 16000)
    part = {
        "type": "audio",
        "data": __import__("base64").b64encode(to_pcm16(audio)).decode(),
        "format": "pcm16",
    }
    async with websockets.connect(
        f"{served.ws}/ws/streaming/p1", additional_headers=AUTH, max_size=None
    ) as ws:
        await ws.send(json.dumps({"type": "prefill", "messages": [{"role": "user", "content": [part]}]}))
        done = None
        while done is None or done["type"] not in ("prefill_done", "error"):
            done = json.loads(await ws.recv())
        assert "weather" in done["transcript"].lower()
        await ws.send(json.dumps({"type": "generate", "generate_audio": True}))
        audio_chunks = 0
        while True:
            msg = json.loads(await ws.recv())
            audio_chunks += bool(msg.get("audio_data"))
            if msg["type"] in ("done", "error"):
                break
    assert msg["type"] == "done" and "weather" in msg["text"].lower() and audio_chunks >= 1


async def manual_turn(conn, events: Events, text: str) -> None:
    await stream(conn, np.concatenate([speech(text), silence(0.3)]), speed=0)
    await conn.input_audio_buffer.commit()
    await events.wait_for(
        "input_audio_buffer.committed", count=len(events.of("input_audio_buffer.committed")) + 1
    )
    await conn.response.create()


async def test_a_lost_stage_is_an_error_and_the_next_turn_works_once_it_is_back(served) -> None:
    served.wait(lambda h: h["workers_idle"] >= 2 and h["pipeline"]["stages_alive"] == 3)
    tts = next(s for s in served.stages()["stages"] if s["name"] == "tts")
    async with client(served.ws, KEY).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        # turns by hand: no voice activity can cut the reply short on a busy machine
        await conn.session.update(session={"type": "realtime", "audio": {"input": {"turn_detection": None}}})
        await events.wait_for("session.updated")
        # stopped, the TTS holds the reply; it is written off only when it dies (lost_after_s is long)
        os.kill(tts["pid"], signal.SIGSTOP)
        await asyncio.sleep(1.6)  # what the gateway shows of the stages is up to ~1.5 s old
        replies = served.loads()["llm"].get("done", 0)
        await manual_turn(conn, events, "Tell me a story.")
        await events.wait_for("response.created", timeout=60)
        served.until(lambda: served.loads()["llm"].get("done", 0) > replies)  # the reply is in the stages
        os.kill(tts["pid"], signal.SIGKILL)  # ...when the TTS dies (the coordinator restarts it)
        failed = await events.wait_for("response.done", timeout=60)
        assert failed.response.status == "failed", failed.response
        assert failed.response.status_details.error.code == "stage_lost"  # a clear error, in the response
        # the stage comes back (a new process) and the same session goes on
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            now = next(s for s in served.stages()["stages"] if s["name"] == "tts")
            if now["alive"] and now["pid"] != tts["pid"]:
                break
            await asyncio.sleep(0.2)
        await manual_turn(conn, events, "Tell me another story.")
        done = await events.wait_for("response.done", count=2, timeout=60)
        await events.stop()
    assert done.response.status == "completed"
    assert any(e.response_id == done.response.id for e in events.of("response.output_audio.delta"))
    # the loss is told once, in the failed response.done: no error event trails it into the next
    # response (issue 25, finding 10: stock clients take an error event as part of what comes next)
    assert events.of("error") == []


async def test_a_duplex_session_runs_on_the_stages(served) -> None:
    served.wait(lambda h: h["workers_idle"] >= 2 and h["pipeline"]["stages_alive"] == 3)
    said = resample(speech("What is the weather like today?"), 24000, 16000)
    quiet = np.zeros(16000, np.float32)
    async with DuplexClient(served.ws, "pipe-dx", timeout=60) as dx:
        await dx.until("queue_done")
        await dx.send("prepare")
        await dx.until("prepared")
        results = [await dx.chunk(c, force_listen=i < 3) for i, c in enumerate(seconds(said))]
        for _ in range(20):
            results.append(await dx.chunk(quiet))
            if any(not r["is_listen"] for r in results) and results[-1].get("end_of_turn"):
                break
        await dx.send("stop")
        await dx.until("stopped")
    spoken = "".join(r["text"] for r in results if not r["is_listen"])  # text deltas
    assert spoken.startswith("You said") and "weather" in spoken.lower()
    assert any(r.get("audio_data") for r in results if not r["is_listen"])
