"""Full duplex through real gateway and worker processes, on the cascade engine (echo LLM).

The MiniCPM-o demo's own client flow (wait for queue_done, prepare, audio_chunks with force_listen
on the first three, stop) with one worker and a second session queued behind the first; pause and
resume as the gateway sees them; the pause timeout; barge-in; a worker killed mid-session.
"""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

from cluster import cluster
from dxclient import DuplexClient, seconds
from omnivox.audio.pcm import b64_to_pcm16
from omnivox.voice.asr.base import word_error_rate
from omnivox.voice.tts.hibari import HibariTts
from speech import WEATHER
from voices import espeak_ng

SILENCE = np.zeros(16000, np.float32)


@pytest.fixture(scope="module")
def weather() -> np.ndarray:
    from omnivox.audio.resample import resample

    audio = np.concatenate([c.audio for c in HibariTts(seed=0).synthesize(WEATHER)])
    return resample(audio, 24000, 16000)


@pytest.fixture(scope="module")
def dx_cluster(tmp_path_factory):
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("dx"), OMNIVOX_LLM="echo") as c:
        yield c


def worker_state(c) -> str:
    return httpx.get(c.url + "/api/workers", timeout=2).json()["workers"][0]["state"]


async def speak_until_answered(cl: DuplexClient, audio: np.ndarray, max_units: int = 40) -> list[dict]:
    """Say ``audio`` (force_listen on the first three units, as the demo's client does), then
    silence until the model has spoken and ended its turn; returns the results."""
    results = []
    for i, chunk in enumerate(seconds(audio)):
        results.append(await cl.chunk(chunk, force_listen=i < 3))
    for _ in range(max_units):
        results.append(await cl.chunk(SILENCE))
        if any(not r["is_listen"] for r in results) and results[-1].get("end_of_turn"):
            break
    return results


async def test_the_demo_client_flow_with_a_second_session_queued(dx_cluster, weather):
    c = dx_cluster
    async with DuplexClient(c.ws, "first") as a:
        assert (await a.until("queue_done"))[-1]["worker_id"]
        async with DuplexClient(c.ws, "second") as b:
            queued = (await b.until("queued"))[-1]
            assert queued["position"] == 1 and queued["queue_length"] == 1
            await a.send("prepare", system_prompt="You are a helpful assistant.", config={"colour": 1})
            prepared = (await a.until("prepared"))[-1]
            assert prepared["mode"] == "audio"
            assert prepared["warnings"] == ["unknown config key 'colour' ignored"]
            assert worker_state(c) == "DUPLEX_ACTIVE"
            results = await speak_until_answered(a, weather)
            assert [r["unit_index"] for r in results] == list(range(len(results)))
            assert all(r["is_listen"] for r in results[:3])  # forced
            spoken = [r for r in results if not r["is_listen"]]
            said = "".join(r["text"] for r in spoken)  # text deltas: their concatenation is the reply
            assert said.startswith("You said:") and "  " not in said, said
            assert word_error_rate(WEATHER, said.split(":", 1)[1]) <= 0.2, said
            assert results[-1]["end_of_turn"] is True, [
                (r["is_listen"], r["text"], r["end_of_turn"], len(r.get("audio_data") or "")) for r in results
            ]
            audio = np.concatenate([b64_to_pcm16(r["audio_data"]) for r in spoken if r.get("audio_data")])
            assert len(audio) > 24000 and np.sqrt(np.mean(audio**2)) > 0.01
            assert all(r["audio_sample_rate"] == 24000 for r in spoken)
            assert all(r["wall_clock_ms"] < 1000 for r in results)  # a unit never took a unit's time
            await a.send("stop")
            stopped = (await a.until("stopped"))[-1]
            assert stopped["session_id"] == "first" and stopped["units"] == len(results)
            # the queued session gets the worker
            assert (await b.until("queue_done"))[-1]["type"] == "queue_done"
            await b.send("prepare")
            await b.until("prepared")
            assert (await b.chunk(SILENCE))["type"] == "result"
            await b.send("stop")
            await b.until("stopped")
    c.wait_idle(1)
    # the reply's breakdown reached the gateway's metrics, as a realtime session's does
    stage_counts = httpx.get(c.url + "/metrics").text
    assert 'omnivox_turn_stage_seconds_count{stage="first_audio_sent"} 1.0' in stage_counts


async def test_pause_and_resume_are_seen_by_the_gateway_and_audio_while_paused_is_refused(dx_cluster):
    c = dx_cluster
    async with DuplexClient(c.ws, "pausing") as cl:
        await cl.until("queue_done")
        await cl.send("prepare")
        await cl.until("prepared")
        await cl.send("pause", timeout=30)
        assert (await cl.until("paused"))[-1]["timeout_s"] == 30
        for _ in range(200):  # the store follows the session's report: 10 s at most
            if worker_state(c) == "DUPLEX_PAUSED":
                break
            await asyncio.sleep(0.05)
        assert worker_state(c) == "DUPLEX_PAUSED"
        sessions = httpx.get(c.url + "/api/sessions").json()["sessions"]
        assert [s["paused"] for s in sessions] == [True]
        assert (await cl.chunk(SILENCE))["code"] == "session_paused"
        await cl.send("resume")
        await cl.until("resumed")
        for _ in range(200):  # the store follows the session's report: 10 s at most
            if worker_state(c) == "DUPLEX_ACTIVE":
                break
            await asyncio.sleep(0.05)
        assert worker_state(c) == "DUPLEX_ACTIVE"
        assert (await cl.chunk(SILENCE))["type"] == "result"
    c.wait_idle(1)


async def test_a_pause_that_times_out_releases_the_worker(dx_cluster):
    c = dx_cluster
    async with DuplexClient(c.ws, "sleepy") as cl:
        await cl.until("queue_done")
        await cl.send("prepare")
        await cl.until("prepared")
        await cl.send("pause", timeout=0.5)
        await cl.until("paused")
        assert (await cl.until("timeout"))[-1]["reason"] == "pause_timeout"
        await asyncio.wait_for(cl.ws.wait_closed(), 5)
        assert cl.ws.close_code == 1000
    c.wait_idle(1)


async def test_speech_over_the_reply_cuts_it_off(dx_cluster, weather):
    c = dx_cluster
    interruption = espeak_ng("stop stop please stop talking now")  # a second voice
    async with DuplexClient(c.ws, "barge") as cl:
        await cl.until("queue_done")
        await cl.send("prepare", config={"force_listen_count": 0})
        await cl.until("prepared")
        for chunk in seconds(weather):
            await cl.chunk(chunk)
        results = []
        for _ in range(40):  # silence until the reply starts
            results.append(await cl.chunk(SILENCE))
            if not results[-1]["is_listen"]:
                break
        assert not results[-1]["is_listen"], "the model never answered"
        after = []
        for chunk in [*seconds(interruption), SILENCE, SILENCE]:
            after.append(await cl.chunk(chunk))
            if after[-1]["is_listen"] and after[-1]["end_of_turn"]:
                break
        assert after[-1]["is_listen"] and after[-1]["end_of_turn"], after
        # nothing of the cut-off reply comes after the cut: the next speech is a new answer (to the
        # interruption), starting with its own first sentence
        later = [await cl.chunk(SILENCE) for _ in range(4)]
        spoken = [r for r in later if not r["is_listen"]]
        if spoken:
            assert spoken[0]["text"].startswith("You said:") and "weather" not in spoken[0]["text"], later
        await cl.send("stop")
        await cl.until("stopped")
    c.wait_idle(1)


async def test_a_worker_killed_mid_session_is_reported_and_the_gateway_recovers(tmp_path):
    with cluster(workers=1, engine="cascade", log_dir=tmp_path, OMNIVOX_LLM="echo") as c:
        async with DuplexClient(c.ws, "doomed", timeout=10) as cl:
            await cl.until("queue_done")
            await cl.send("prepare")
            await cl.until("prepared")
            await cl.chunk(SILENCE)
            c.workers[0].kill()
            err = (await cl.until("error"))[-1]
            assert err["code"] == "worker_lost"
            await asyncio.wait_for(cl.ws.wait_closed(), 5)
            assert cl.ws.close_code == 1011
        # the gateway lets the session go after the client saw it closed (its taps finish first):
        # wait for it (10 s at most), then say what is left
        for _ in range(100):
            if httpx.get(c.url + "/api/sessions").json()["active_sessions"] == 0:
                break
            await asyncio.sleep(0.1)
        assert worker_state(c) == "OFFLINE"
        assert httpx.get(c.url + "/api/sessions").json()["active_sessions"] == 0
        async with DuplexClient(c.ws, "next", timeout=30) as nxt:
            assert (await nxt.until("queued"))[-1]["position"] == 1  # waits for a worker to come back
            c.add_worker("cascade")  # a new one joins and takes it
            assert (await nxt.until("queue_done"))[-1]["type"] == "queue_done"
            await nxt.send("prepare")
            await nxt.until("prepared")
