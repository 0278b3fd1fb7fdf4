"""Session recording end to end: real gateway and cascade worker processes, real clients of each
protocol (the openai SDK for realtime), the files on disk, the recordings API and its replays.

Placement is checked by ear, as it were: in the stereo replay the user's speech must be loud on the
left where the timeline puts the user's turn, the reply loud on the right where it puts the reply,
and silent on the right past a barge-in.
"""

from __future__ import annotations

import asyncio
import base64
import io
import wave

import av
import httpx
import numpy as np
import pytest

from cluster import cluster
from dxclient import DuplexClient, seconds
from omnivox.audio.pcm import pcm16_to_b64
from omnivox.audio.resample import resample
from omnivox.bench.webrtc_client import WebRtcCall, loopback_only
from omnivox.video.frames import encode_jpeg
from omnivox.voice.asr.base import word_error_rate
from recordings import finished, loud_spans, recording_env, rms, stereo
from rtclient import Events, client, silence, speech, stream
from speech import WEATHER
from wsclient import StreamingClient

ADMIN = {"Authorization": "Bearer adminkey"}
STORY = "tell me a long story about a brave little fox who lived in the forest by the river"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def rec(tmp_path_factory, data_dir):
    loopback_only()  # WebRTC calls (this process's, and the gateway's) stay on 127.0.0.1
    env = recording_env(data_dir, OMNIVOX_ADMIN_KEY="adminkey", OMNIVOX_WEBRTC_HOST_ADDRESSES='["127.0.0.1"]')
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("logs"), **env) as c:
        yield c


@pytest.fixture(autouse=True)
def idle_worker(request):
    if "rec" in request.fixturenames:
        request.getfixturevalue("rec").wait_idle(1, timeout=20)


def replay(c, detail: dict) -> tuple[np.ndarray, np.ndarray]:
    resp = httpx.get(c.url + detail["media"]["wav"], timeout=10)  # the link's token, no key
    assert resp.status_code == 200 and resp.headers["content-type"] == "audio/wav"
    return stereo(resp.content)


def turns_of(detail: dict, role: str) -> list[dict]:
    return [t for t in detail["timeline"]["turns"] if t["role"] == role]


# ---- one session of each kind


async def test_a_streaming_session_is_recorded_with_its_spoken_question_and_reply(rec, data_dir):
    question = speech(WEATHER)
    part = {"type": "audio", "data": pcm16_to_b64(question), "format": "pcm16", "sample_rate": 24000}
    messages = [{"role": "user", "content": [part]}]
    async with StreamingClient(rec.ws, "rec-streaming", timeout=30) as cl:
        await asyncio.sleep(3.0)  # the question is recorded before it is sent: it ends when it arrives
        first = await cl.turn(messages, generate_audio=True)
        messages += [
            {"role": "assistant", "content": first["text"]},
            {"role": "user", "content": "thank you"},
        ]
        await cl.turn(messages)
    detail = finished(rec.url, "rec-streaming", ADMIN)
    meta = detail["meta"]
    assert (meta["kind"], meta["turns"], meta["engine"]) == ("streaming", 2, "cascade")
    assert meta["outcome"]["reason"] == "client_left" and meta["incomplete"] is False
    assert "client_address" not in meta  # kept only with record_client_address
    turns = detail["timeline"]["turns"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
    assert word_error_rate(WEATHER, turns[0]["text"]) <= 0.1
    assert turns[1]["text"] == f"You said: {turns[0]['text']}"
    assert (turns[2]["text"], turns[3]["text"]) == ("thank you", "You said: thank you")
    assert turns[1]["figures"]["cache_hit"] is False and turns[3]["figures"]["cache_hit"] is True
    assert "ttft_s" in turns[1]["figures"]

    # the chunk files decode: the question whole, at its own rate; the reply as 24 kHz speech
    folder = data_dir / "sessions" / "rec-streaming"
    with wave.open(str(folder / "user_audio" / "000001.wav")) as w:
        assert w.getframerate() == 24000 and abs(w.getnframes() - len(question)) <= 1
    assert sorted(p.name for p in (folder / "ai_audio").iterdir())[0] == "000001.wav"
    left, right = replay(rec, detail)
    user, reply = turns[0], turns[1]
    assert user["end"] - user["start"] == pytest.approx(len(question) / 24000, abs=0.01)
    assert rms(left, user["start"], user["end"]) > 0.02  # the question, where the timeline says
    assert rms(right, user["start"], user["end"]) < 0.002
    assert reply["start"] >= user["end"] - 0.01 and rms(right, reply["start"], reply["end"]) > 0.02
    assert rms(left, reply["start"] + 0.1, reply["end"]) < 0.002

    listing = httpx.get(rec.url + "/api/recordings", headers=ADMIN).json()["recordings"]
    item = next(r for r in listing if r["session_id"] == "rec-streaming")
    assert item["kind"] == "streaming" and item["turns"] == 2 and item["bytes"] > 100_000
    assert item["duration_s"] == pytest.approx(meta["duration_s"]) and item["started_at"] > 0


async def test_a_duplex_session_has_both_voices_at_their_places_in_the_replay(rec):
    weather = resample(speech(WEATHER), 24000, 16000)
    async with DuplexClient(rec.ws, "rec-duplex", timeout=30, speed=1.0) as cl:  # a live microphone
        await cl.until("queue_done")
        await cl.send("prepare", config={"force_listen_count": 1})
        await cl.until("prepared")
        results = [await cl.chunk(np.zeros(16000, np.float32))]
        for chunk in seconds(weather):
            results.append(await cl.chunk(chunk))
        for _ in range(20):
            results.append(await cl.chunk(np.zeros(16000, np.float32)))
            if any(not r["is_listen"] for r in results) and results[-1]["end_of_turn"]:
                break
        await cl.send("stop")
        await cl.until("stopped")
    said = "".join(r["text"] for r in results)  # text deltas
    detail = finished(rec.url, "rec-duplex", ADMIN)
    assert detail["meta"]["kind"] == "duplex" and detail["meta"]["task_type"] == "audio_duplex"
    users, replies = turns_of(detail, "user"), turns_of(detail, "assistant")
    assert len(users) == 1 and len(replies) == 1, detail["timeline"]["turns"]
    user, reply = users[0], replies[0]
    assert reply["text"] == said.strip() and reply["status"] == "completed"
    # the user spoke in the second to fourth second of the session (one silent unit first), as
    # long as the speech in the clip lasts
    (begin, end), *_ = loud_spans(speech(WEATHER))
    assert user["end"] - user["start"] == pytest.approx(end - begin, abs=0.2)
    assert 0.5 < user["start"] < 2.5
    assert reply["start"] > user["end"] and reply["latency_s"] == pytest.approx(reply["start"] - user["end"])
    left, right = replay(rec, detail)
    assert loud_spans(left) and abs(loud_spans(left)[0][0] - user["start"]) < 0.15
    reply_spans = loud_spans(right)
    assert reply_spans and reply_spans[0][0] >= user["end"] - 0.05
    assert reply["start"] <= reply_spans[0][0] <= reply["start"] + 0.5  # (speech has a quiet onset)
    assert rms(right, 0, user["end"]) < 0.002 and rms(right, reply["start"], reply["end"]) > 0.02


async def test_an_omni_session_gets_a_video_replay_of_its_frames(rec):
    frames = [np.full((48, 64, 3), (40 * i, 200 - 40 * i, 90), np.uint8) for i in range(4)]
    async with DuplexClient(rec.ws, "omni_rec", timeout=30, speed=4.0) as cl:
        await cl.until("queue_done")
        await cl.send("prepare")
        await cl.until("prepared")
        for frame in frames:
            jpeg = base64.b64encode(encode_jpeg(frame)).decode()
            await cl.chunk(np.zeros(16000, np.float32), frame_base64_list=[jpeg])
        await cl.send("stop")
        await cl.until("stopped")
    detail = finished(rec.url, "omni_rec", ADMIN)
    assert detail["meta"]["task_type"] == "omni_duplex" and detail["meta"]["files"]["user_frames"] == 4
    assert detail["media"]["mp4"]
    resp = httpx.get(rec.url + detail["media"]["mp4"], timeout=10)
    assert resp.status_code == 200 and resp.headers["content-type"] == "video/mp4"
    with av.open(io.BytesIO(resp.content)) as video:
        kinds = {s.type: s.codec_context.name for s in video.streams}
        assert kinds == {"video": "h264", "audio": "aac"}
        pictures = [f.to_ndarray(format="rgb24") for f in video.decode(video=0)]
    assert len(pictures) >= 4
    first = pictures[0].reshape(-1, 3).mean(axis=0)
    assert np.abs(first - (0, 200, 90)).max() < 20  # the first frame the camera sent
    frame = httpx.get(rec.url + detail["media"]["files"] + "user_frames/000002.jpg", headers=ADMIN)
    assert frame.status_code == 200 and frame.headers["content-type"] == "image/jpeg"


async def test_a_realtime_session_records_turns_transcripts_figures_and_a_barge_in(rec):
    async with client(rec.ws, api_key="unused").realtime.connect(
        model="omnivox", extra_query={"session_id": "rec-realtime"}
    ) as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        await stream(conn, np.concatenate([silence(0.5), speech(WEATHER), silence(1.2)]), chunk_ms=40)
        first = await events.wait_for("response.done")
        await stream(conn, np.concatenate([speech(STORY), silence(0.8)]), chunk_ms=40)
        reply = await events.wait_for("response.created", count=2)
        await events.wait_for("response.output_audio.delta", response_id=reply.response.id)
        await asyncio.sleep(1.5)  # hear a second and a half of it, then talk over it
        await stream(conn, np.concatenate([speech("stop please"), silence(1.0)]), chunk_ms=40)
        cut = await events.wait_for("response.done", count=2)
        await events.wait_for("response.done", count=3)
        await events.stop()
    assert first.response.status == "completed"
    assert cut.response.status == "cancelled"
    detail = finished(rec.url, "rec-realtime", ADMIN)
    users, replies = turns_of(detail, "user"), turns_of(detail, "assistant")
    assert len(users) == 3 and len(replies) == 3, detail["timeline"]["turns"]
    heard = users[0]["text"]
    assert word_error_rate(WEATHER, heard) <= 0.1 and replies[0]["text"] == f"You said: {heard}"
    left, right = replay(rec, detail)
    # server VAD's positions in the user's audio stream, mapped onto the clock: where the speech is
    spoken = loud_spans(left)
    assert len(spoken) == 3, spoken
    for turn, (begin, end) in zip(users, spoken, strict=True):
        assert turn["start"] == pytest.approx(begin, abs=0.1) and turn["end"] == pytest.approx(end, abs=0.3)
    assert replies[0]["figures"]["voice_to_voice_s"] > 0 and replies[0]["latency_s"] > 0
    assert replies[1]["interrupted"] and replies[1]["status"] == "cancelled"
    assert not replies[0]["interrupted"] and detail["meta"]["barge_ins"] == 1
    barge = next(e for e in detail["timeline"]["events"] if e["type"] == "barge_in")
    assert rms(left, users[0]["start"], users[0]["end"]) > 0.02
    assert rms(right, replies[0]["start"], replies[0]["end"]) > 0.02
    assert rms(right, replies[1]["start"], barge["t"]) > 0.02  # the story, until the barge-in
    assert replies[1]["end"] <= barge["t"] + 0.01
    assert rms(right, barge["t"] + 0.02, replies[2]["start"]) < 0.002  # nothing of it after the cut
    assert rms(left, users[2]["start"], users[2]["end"]) > 0.02  # the words that cut it off


async def test_a_webrtc_call_is_recorded_like_a_websocket_session(rec):
    call = await WebRtcCall.open(rec.url, "unused")
    try:
        await call.wait_for("session.updated")
        call.mic.play(np.concatenate([speech(WEATHER), silence(1.0)]))
        done = await call.wait_for("response.done", timeout=30)
        await call.wait_for("output_audio_buffer.stopped", response_id=done["response"]["id"], timeout=20)
    finally:
        await call.close()
    assert call.call_id is not None
    detail = finished(rec.url, call.call_id, ADMIN)
    assert detail["meta"]["kind"] == "realtime"
    users, replies = turns_of(detail, "user"), turns_of(detail, "assistant")
    assert len(users) == 1 and len(replies) == 1, detail["timeline"]["turns"]
    assert word_error_rate(WEATHER, users[0]["text"]) <= 0.1
    left, right = replay(rec, detail)
    assert rms(left, users[0]["start"], users[0]["end"]) > 0.02  # the caller's voice, from the Opus track
    assert rms(right, replies[0]["start"], replies[0]["end"]) > 0.02


# ---- opting out, and a server that decides


async def test_opting_out_leaves_nothing_on_any_protocol(rec, data_dir):
    async with DuplexClient(rec.ws, "out-duplex", timeout=30) as cl:
        await cl.until("queue_done")
        await cl.send("prepare", record=False)
        await cl.until("prepared")
        await cl.chunk(resample(speech(WEATHER), 24000, 16000)[:16000])
        await cl.send("stop")
        await cl.until("stopped")
    async with StreamingClient(rec.ws, "out-streaming") as cl:
        await cl.send("prefill", messages=[{"role": "user", "content": "private"}], record=False)
        await cl.until("prefill_done")
        await cl.send("generate")
        await cl.until("done")
    rec.wait_idle(1)
    # realtime: the choice may come late (after audio): what was recorded so far goes too
    async with client(rec.ws).realtime.connect(
        model="omnivox", extra_query={"session_id": "out-realtime"}
    ) as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        await stream(conn, speech(WEATHER)[:24000], chunk_ms=40, speed=0)
        for _ in range(100):  # the recorder's threads write it: 10 s at most on a loaded machine
            if (data_dir / "sessions" / "out-realtime").exists():
                break
            await asyncio.sleep(0.1)
        assert (data_dir / "sessions" / "out-realtime").exists()
        await conn.session.update(session={"type": "realtime", "record": False})
        await events.wait_for("session.updated")
        await stream(conn, speech(WEATHER)[:24000], chunk_ms=40, speed=0)
        await events.stop()
    await asyncio.sleep(1.0)  # room for anything that would still be written of them
    # what out-realtime recorded before it opted out is removed on the recorder's threads, which on
    # a loaded machine may be later still: wait for it (10 s at most), then check every one
    for _ in range(100):
        if not (data_dir / "sessions" / "out-realtime").exists():
            break
        await asyncio.sleep(0.1)
    for name in ("out-duplex", "out-streaming", "out-realtime"):
        assert not (data_dir / "sessions" / name).exists(), name
        assert httpx.get(f"{rec.url}/api/recordings/{name}", headers=ADMIN).status_code == 404
    assert not any(p.name.startswith("out-") for p in (data_dir / "sessions").iterdir())


async def test_the_server_may_forbid_opting_out_and_allow_opting_in(tmp_path):
    forced = recording_env(
        tmp_path / "forced", OMNIVOX_RECORD_ALLOW_OPT_OUT="false", OMNIVOX_RECORD_CLIENT_ADDRESS="true"
    )
    with cluster(workers=1, engine="echo", **forced) as c:
        async with StreamingClient(c.ws, "kept") as cl:
            await cl.send("prefill", messages=[{"role": "user", "content": "hello"}], record=False)
            await cl.until("prefill_done")
            await cl.send("generate")
            await cl.until("done")
        detail = finished(c.url, "kept", {})
        assert detail["meta"]["record_refused"] == ["opt_out"]
        assert detail["meta"]["client_address"] == "127.0.0.1"
        assert detail["timeline"]["turns"][0]["text"] == "hello"
    optional = recording_env(
        tmp_path / "optional", OMNIVOX_RECORD_SESSIONS="false", OMNIVOX_RECORD_ALLOW_OPT_IN="true"
    )
    with cluster(workers=1, engine="echo", **optional) as c:
        for name, choice in (("asked", True), ("not-asked", None)):
            async with StreamingClient(c.ws, name) as cl:
                extra = {"record": choice} if choice is not None else {}
                await cl.send("prefill", messages=[{"role": "user", "content": "hi"}], **extra)
                await cl.until("prefill_done")
                await cl.send("generate")
                await cl.until("done")
        assert finished(c.url, "asked", {})["timeline"]["turns"][1]["text"] == "(echo) hi"
        await asyncio.sleep(0.5)
        assert httpx.get(c.url + "/api/recordings/not-asked").status_code == 404
    # a bare gateway records nothing unless told to (the embedded `serve` default records)
    with cluster(workers=1, engine="echo", OMNIVOX_DATA_DIR=str(tmp_path / "bare")) as c:
        async with StreamingClient(c.ws, "bare") as cl:
            await cl.send("prefill", messages=[{"role": "user", "content": "hi"}], record=True)
            await cl.until("prefill_done")
        await asyncio.sleep(0.5)
        assert not (tmp_path / "bare" / "sessions" / "bare").exists()
