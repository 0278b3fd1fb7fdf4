"""Sessions on a staged pipeline's shared slots, on real processes (issue 15): the ASR stage's slots
are the gateway's capacity (sessions past them wait in its queue, not refused), and a barge-in
aborts the reply in every stage it is in.

``serve --pipeline`` runs a cascade whose ASR has one slot and two light workers, so the second
session finds a free worker but no slot. The echo LLM writes a word every 0.2 s, so a reply is still
being written (in the LLM stage) and spoken (in the TTS stage) when the caller talks over it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import numpy as np
import pytest
import websockets

from omnivox.audio.pcm import pcm16_to_b64
from omnivox.pipeline.spec import load_spec, to_toml
from pipeline_served import AUTH, KEY, Served

from ..rtclient import Events, client, silence, speech, stream

WEATHER = "what is the weather like in paris today"
STORY = "tell me a long story about a brave little fox who lived in the forest by the river"


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("pipeline-slots")
    spec = load_spec("cascade")
    spec.stage("asr").slots = 1
    path = folder / "one-slot.toml"
    path.write_text(to_toml(spec))
    s = Served(folder, spec=str(path), workers=2, env={"OMNIVOX_ECHO_DELAY_S": "0.2"})
    try:
        s.wait(lambda h: s.ready(h) and h["pipeline"]["session_slots"] == 1)
        yield s
    finally:
        s.stop()


async def receive(ws, timeout: float = 10.0) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def test_sessions_past_the_asr_slots_wait_in_the_gateway_queue(served) -> None:
    url = served.ws + "/v1/realtime?omnivox_events=true"  # queue notices are omnivox's events
    async with websockets.connect(url, additional_headers=AUTH) as holder:
        assert (await receive(holder))["type"] == "session.created"
        served.wait(lambda h: h["pipeline"]["session_slots_used"] == 1, timeout=60)  # says what it saw
        async with websockets.connect(url, additional_headers=AUTH) as waiting:
            queued = await receive(waiting)
            assert (queued["type"], queued["status"], queued["position"]) == ("omnivox.queue", "queued", 1)
            health = served.health()
            # a worker is free, the slot is not: the session waits (it is not refused)
            assert health["workers_idle"] == 1 and health["queue_length"] == 1
            assert (health["pipeline"]["session_slots"], health["pipeline"]["session_slots_used"]) == (1, 1)
            view = served.stages()
            assert (view["session_slots"], view["session_slots_used"]) == (1, 1)
            served.until(lambda: served.loads()["asr"]["slots_used"] == 1)  # reported about once a second
            await holder.close()  # the slot is freed: the waiting session gets it
            msg = await receive(waiting, 30)
            while msg["type"] == "omnivox.queue":
                msg = await receive(waiting, 30)
            assert msg["type"] == "session.created"
            # and it is heard on that slot
            audio = np.concatenate([silence(0.3), speech(WEATHER), silence(1.0)])
            for i in range(0, len(audio), 960):
                append = {"type": "input_audio_buffer.append", "audio": pcm16_to_b64(audio[i : i + 960])}
                await waiting.send(json.dumps(append))
            while (msg := await receive(waiting, 60))["type"] != "response.done":
                assert msg["type"] != "error", msg
            assert msg["response"]["status"] == "completed"
            assert "weather" in msg["response"]["output"][0]["content"][0]["transcript"].lower()
    served.wait(lambda h: h["pipeline"]["session_slots_used"] == 0 and h["queue_length"] == 0)


async def test_a_barge_in_aborts_the_reply_in_every_stage(served) -> None:
    served.wait(lambda h: h["pipeline"]["session_slots_used"] == 0 and h["workers_idle"] == 2)
    before = served.loads()
    aborted_before = served.stages()["counts"].get("aborted", 0)
    async with client(served.ws, KEY).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        await stream(conn, np.concatenate([silence(0.3), speech(STORY), silence(1.0)]), speed=0)
        first = await events.wait_for("response.output_audio.delta", timeout=60)
        # the LLM has written a few of its words (a word each 0.2 s): talk over the reply now
        talk = asyncio.create_task(stream(conn, np.concatenate([speech(WEATHER), silence(1.0)]), chunk_ms=20))
        done = await events.wait_for("response.done", response__id=first.response_id, timeout=30)
        assert done.response.status == "cancelled"
        await talk
        second = await events.wait_for("response.done", count=2, timeout=60)
        await events.stop()
    assert second.response.status == "completed"
    # the cut reply was stopped in the LLM and in the TTS, not left to finish there

    def stopped_everywhere() -> bool:
        after = served.loads()
        return all(
            after[stage].get("aborted", 0) >= before[stage].get("aborted", 0) + 1
            and after[stage].get("running", 0) == 0
            for stage in ("llm", "tts")
        )

    served.until(stopped_everywhere)
    assert served.stages()["counts"]["aborted"] >= aborted_before + 1
