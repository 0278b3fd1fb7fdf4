"""/v1/realtime end to end: the official openai SDK against a real gateway and cascade worker.

Speech is synthesised by hibari and sent as a microphone would (PCM16 24 kHz appends); the worker
hears it with silero VAD and PocketSphinx, answers with the echo LLM and speaks with hibari.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import numpy as np
import pytest
import websockets

from cluster import ECHO_VOICE, cluster
from omnivox.voice.asr.base import word_error_rate
from rtclient import OMNIVOX_EVENTS, Events, audio_of, client, silence, speech, stream

WEATHER = "what is the weather like in paris today"
STORY = "tell me a long story about a brave little fox who lived in the forest by the river"


@pytest.fixture(scope="module")
def rt_cluster(tmp_path_factory):
    env = {
        "OMNIVOX_API_KEY": "secret",
        "OMNIVOX_REALTIME_MAX_WAIT_S": "1.5",
        "OMNIVOX_MAX_QUEUE_SIZE": "1",
        **ECHO_VOICE,
    }
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("rt"), **env) as c:
        yield c


@pytest.fixture(autouse=True)
def idle_worker(request):
    """Each test starts with the worker free (the previous test's session may still be winding down)."""
    if "rt_cluster" in request.fixturenames:
        request.getfixturevalue("rt_cluster").wait_idle(1, timeout=15)


async def test_server_vad_turn_gets_transcript_and_spoken_reply(rt_cluster):
    async with client(rt_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        created = await events.wait_for("session.created")
        assert created.session.audio.input.turn_detection.type == "server_vad"
        await conn.session.update(
            session={"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad"}}}}
        )
        await events.wait_for("session.updated")
        await stream(
            conn, np.concatenate([silence(0.4), speech(WEATHER), silence(1.2)]), chunk_ms=40, speed=2
        )
        done = await events.wait_for("response.done")
        await events.stop()

    assert done.response.status == "completed"
    heard = events.of("conversation.item.input_audio_transcription.completed")[0].transcript
    assert word_error_rate(WEATHER, heard) <= 0.1
    assert events.of("conversation.item.input_audio_transcription.delta")  # live while speaking
    order = [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "response.created",
        "response.output_audio.delta",
        "response.output_audio_transcript.done",
        "response.done",
    ]
    firsts = [events.times(kind)[0] for kind in order]
    assert firsts == sorted(firsts)
    audio = audio_of(events, done.response.id)
    assert len(audio) > 24000 and np.sqrt(np.mean(audio**2)) > 0.01  # over a second of real sound
    transcript = events.of("response.output_audio_transcript.done")[0].transcript
    assert transcript == f"You said: {heard}"
    assert done.response.output[0].content[0].transcript == transcript
    assert done.response.usage.output_tokens > 0


async def test_manual_turns_commit_then_response_create(rt_cluster):
    async with client(rt_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await conn.session.update(session={"type": "realtime", "audio": {"input": {"turn_detection": None}}})
        updated = await events.wait_for("session.updated")
        assert updated.session.audio.input.turn_detection is None
        await stream(conn, np.concatenate([speech(WEATHER), silence(0.3)]), chunk_ms=100, speed=0)
        await asyncio.sleep(0.3)
        assert not events.of("response.created") and not events.of("input_audio_buffer.speech_started")
        await conn.input_audio_buffer.commit()
        committed = await events.wait_for("input_audio_buffer.committed")
        heard = await events.wait_for("conversation.item.input_audio_transcription.completed")
        assert heard.item_id == committed.item_id and word_error_rate(WEATHER, heard.transcript) <= 0.1
        await conn.response.create()
        done = await events.wait_for("response.done")
        assert done.response.status == "completed"
        assert len(audio_of(events, done.response.id)) > 24000

        # a typed item and a text-only reply
        await conn.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "hello there"}],
            }
        )
        await events.wait_for("conversation.item.done", count=3)
        await conn.response.create(response={"output_modalities": ["text"]})
        text_done = await events.wait_for("response.done", count=2)
        assert text_done.response.output_modalities == ["text"]
        deltas = [
            e.delta for e in events.of("response.output_text.delta") if e.response_id == text_done.response.id
        ]
        assert "".join(deltas) == "You said: hello there"
        assert not audio_of(events, text_done.response.id).size
        await events.stop()


async def test_barge_in_cancels_the_reply_and_truncates_it(rt_cluster):
    async with client(rt_cluster.ws).realtime.connect(model="omnivox", extra_query=OMNIVOX_EVENTS) as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        await stream(conn, np.concatenate([speech(STORY), silence(0.8)]), chunk_ms=40, speed=3)
        first_audio = await events.wait_for("response.output_audio.delta")
        reply_id = first_audio.response_id
        # the reply is several seconds of speech, paced in real time: talk over it after 1 s
        await asyncio.sleep(1.0)
        talk = asyncio.create_task(stream(conn, np.concatenate([speech(WEATHER), silence(1.0)]), chunk_ms=20))
        started = await events.wait_for("input_audio_buffer.speech_started", count=2)
        done = await events.wait_for("response.done", response__id=reply_id)
        done_at = next(t for t, e in events.seen if e is done)
        assert done.response.status == "cancelled"
        assert done.response.status_details.reason == "turn_detected"
        # its audio paused as soon as the speech held, then the words made it a barge-in
        paused = events.of("omnivox.interruption.paused")[0]
        assert paused.response_id == reply_id and not events.of("omnivox.interruption.resumed")
        assert started.item_id != first_audio.item_id

        truncated = await events.wait_for("conversation.item.truncated", item_id=first_audio.item_id)
        sent_ms = len(audio_of(events, reply_id)) * 1000 / 24000
        assert 0 < truncated.audio_end_ms <= sent_ms + 1
        assert truncated.audio_end_ms == paused.audio_end_ms
        full = f"You said: {events.of('conversation.item.input_audio_transcription.completed')[0].transcript}"
        kept = done.response.output[0].content[0].transcript
        assert kept and len(kept) < len(full) and full.startswith(kept.rsplit(" ", 1)[0])
        assert done.response.output[0].status == "incomplete"
        # no audio of the cancelled reply arrives after its response.done (its breakdown may)
        after = [e for t, e in events.seen if t > done_at and getattr(e, "response_id", None) == reply_id]
        assert all(e.type == "omnivox.turn.breakdown" for e in after), [e.type for e in after]
        # the interruption is a new turn that gets its own reply
        second = await events.wait_for("response.done", count=2)
        await talk
        assert second.response.status == "completed"
        assert "weather" in second.response.output[0].content[0].transcript
        # what the LLM saw of the first reply is what was heard: the item was cut
        await conn.conversation.item.retrieve(item_id=first_audio.item_id)
        retrieved = await events.wait_for("conversation.item.retrieved")
        assert retrieved.item.content[0].transcript == kept
        await events.stop()
    metrics = httpx.get(rt_cluster.url + "/metrics", headers={"Authorization": "Bearer secret"}).text
    assert "omnivox_realtime_interruptions_total 1.0" in metrics
    assert "omnivox_voice_to_voice_seconds_count" in metrics


async def test_auth_is_checked_before_any_audio(rt_cluster):
    # the SDK with a wrong key: refused before the session exists, the socket closed with 1008
    async with client(rt_cluster.ws, api_key="wrong").realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        error = await events.wait_for("error")
        assert error.error.code == "unauthorized" and error.error.type == "invalid_request_error"
        await asyncio.wait_for(events._task, 5)  # the server closed the connection
        assert not events.of("session.created")
        assert conn._connection.close_code == 1008
    # no key at all
    async with websockets.connect(rt_cluster.ws + "/v1/realtime") as ws:
        refused = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert refused["error"]["code"] == "unauthorized"
        await asyncio.wait_for(ws.wait_closed(), 5)
        assert ws.close_code == 1008
    # a browser cannot set headers: it passes the key as a subprotocol
    async with websockets.connect(
        rt_cluster.ws + "/v1/realtime", subprotocols=["realtime", "openai-insecure-api-key.secret"]
    ) as ws:
        assert ws.subprotocol == "realtime"
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "session.created"


async def test_session_limit_when_the_wait_runs_out_or_the_queue_is_full(rt_cluster):
    headers = {"Authorization": "Bearer secret"}
    url = rt_cluster.ws + "/v1/realtime?omnivox_events=true"  # queue notices are omnivox's events
    async with websockets.connect(url, additional_headers=headers) as holder:
        assert json.loads(await holder.recv())["type"] == "session.created"  # takes the only worker
        async with websockets.connect(url, additional_headers=headers) as waiting:
            queued = json.loads(await asyncio.wait_for(waiting.recv(), 5))
            assert queued["type"] == "omnivox.queue" and queued["position"] == 1
            async with websockets.connect(url, additional_headers=headers) as third:
                full = json.loads(await asyncio.wait_for(third.recv(), 5))
                assert full["type"] == "error" and full["error"]["code"] == "session_limit_reached"
                await asyncio.wait_for(third.wait_closed(), 5)
                assert third.close_code == 1008
            # what a waiting client sends is held for it, up to a limit; past it, it hears it is dropped
            big = {"type": "input_audio_buffer.append", "audio": "A" * (1024 * 1024)}
            for _ in range(5):
                await waiting.send(json.dumps(big))
            codes = []
            while (msg := json.loads(await asyncio.wait_for(waiting.recv(), 5)))[
                "type"
            ] == "omnivox.queue" or (
                msg["type"] == "error" and msg["error"]["code"] != "session_limit_reached"
            ):
                codes += [msg["error"]["code"]] if msg["type"] == "error" else []
            assert codes == ["queued_input_dropped"]
            assert msg["type"] == "error" and msg["error"]["code"] == "session_limit_reached"
            assert "1.5 s" in msg["error"]["message"]  # it waited the configured time, then gave up
            await asyncio.wait_for(waiting.wait_closed(), 5)
            assert waiting.close_code == 1008
    # the worker is released and the next session is served (after a moment in the queue, at most:
    # the holder's socket closes a little before the gateway hears of it and frees the worker)
    async with websockets.connect(url, additional_headers=headers) as again:
        while (msg := json.loads(await asyncio.wait_for(again.recv(), 10)))["type"] == "omnivox.queue":
            assert (msg["status"], msg["position"]) in (("queued", 1), ("assigned", 0))
        assert msg["type"] == "session.created"


class RawSession:
    """A raw websockets client, for frames the SDK would never send."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.seen: list[dict] = []  # everything received
        self._unread: list[dict] = []  # received but not yet returned by until()

    async def send(self, frame) -> None:
        await self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def until(self, kind: str, timeout: float = 10.0, **match) -> dict:
        """The next event of type ``kind`` (events of other types stay readable by later calls)."""
        while True:
            for n, msg in enumerate(self._unread):
                if msg["type"] == kind and all(msg.get(k) == v for k, v in match.items()):
                    del self._unread[n]
                    return msg
            msg = json.loads(await asyncio.wait_for(self.ws.recv(), timeout))
            self.seen.append(msg)
            self._unread.append(msg)

    async def error(self, frame, timeout: float = 10.0) -> dict:
        await self.send(frame)
        return (await self.until("error", timeout))["error"]


def raw(c, **extra):
    return websockets.connect(
        c.ws + "/v1/realtime", additional_headers={"Authorization": "Bearer secret", **extra}, max_size=None
    )


async def test_every_error_code_and_the_session_stays_open(rt_cluster):
    async with raw(rt_cluster) as ws:
        s = RawSession(ws)
        await s.until("session.created")
        assert (await s.error("{not json"))["code"] == "invalid_event"
        unknown = await s.error({"type": "input_audio_buffer.explode", "event_id": "e1"})
        assert unknown["code"] == "invalid_event" and unknown["event_id"] == "e1"
        missing = await s.error({"type": "input_audio_buffer.append", "event_id": "e2"})
        assert (missing["code"], missing["param"], missing["event_id"]) == ("invalid_event", "audio", "e2")
        wrong = await s.error({"type": "conversation.item.truncate", "item_id": "x", "audio_end_ms": "soon"})
        assert wrong["code"] == "invalid_event" and wrong["param"] == "audio_end_ms"
        bad_audio = await s.error({"type": "input_audio_buffer.append", "audio": "!!not base64!!"})
        assert bad_audio["code"] == "invalid_audio"
        odd = await s.error({"type": "input_audio_buffer.append", "audio": "AAAA"})  # 3 bytes: half a sample
        assert odd["code"] == "invalid_audio"
        bad_cfg = await s.error(
            {
                "type": "session.update",
                "session": {"audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 7}}}},
            }
        )
        assert bad_cfg["code"] == "invalid_event" and bad_cfg["param"].endswith("turn_detection.threshold")
        bad_fmt = await s.error(
            {"type": "session.update", "session": {"audio": {"input": {"format": {"type": "audio/mp3"}}}}}
        )
        assert bad_fmt["param"].startswith("session.audio.input.format")
        await s.send({"type": "session.update", "session": {"audio": {"input": {"turn_detection": None}}}})
        await s.until("session.updated")
        empty = await s.error({"type": "input_audio_buffer.commit"})
        assert empty["code"] == "input_audio_buffer_commit_empty"
        assert (await s.error({"type": "response.cancel"}))["code"] == "response_cancel_not_active"
        assert (await s.error({"type": "conversation.item.retrieve", "item_id": "item_nope"}))[
            "code"
        ] == "item_retrieve_invalid_item_id"
        assert (await s.error({"type": "conversation.item.delete", "item_id": "item_nope"}))[
            "code"
        ] == "item_delete_invalid_item_id"
        big = "A" * (9 * 1024 * 1024)
        assert (await s.error({"type": "input_audio_buffer.append", "audio": big}, timeout=30))[
            "code"
        ] == "message_too_large"
        # two responses at once
        await s.send(
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "one two three four five six seven eight nine ten"}
                    ],
                },
            }
        )
        await s.send({"type": "response.create"})
        busy = await s.error({"type": "response.create", "event_id": "again"})
        assert busy["code"] == "conversation_already_has_active_response" and busy["event_id"] == "again"
        created = await s.until("response.created")
        cancel_other = await s.error({"type": "response.cancel", "response_id": "resp_other"})
        assert cancel_other["code"] == "response_cancel_not_active"
        await s.send({"type": "response.cancel", "response_id": created["response"]["id"]})
        done = await s.until("response.done")
        assert done["response"]["status"] == "cancelled"
        assert done["response"]["status_details"]["reason"] == "client_cancelled"
        # still fully usable
        await s.send({"type": "session.update", "session": {"instructions": "be brief"}})
        updated = await s.until("session.updated")
        assert updated["session"]["instructions"] == "be brief"
    metrics = httpx.get(rt_cluster.url + "/metrics", headers={"Authorization": "Bearer secret"}).text
    assert 'omnivox_errors_total{code="invalid_event"}' in metrics
    assert 'omnivox_errors_total{code="input_audio_buffer_commit_empty"} 1.0' in metrics


async def test_random_malformed_events_do_not_crash_or_stall_the_session(rt_cluster):
    import random

    rng = random.Random(7)
    types = [
        "session.update",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "conversation.item.create",
        "conversation.item.truncate",
        "response.create",
        "response.cancel",
        "bogus",
        "",
        None,
        5,
    ]
    junk = [None, 0, -1, 1e308, "", "x" * 300, [], {}, {"a": {"b": [1, None]}}, True, "AAAA", "%%%"]

    def event() -> str:
        roll = rng.random()
        if roll < 0.1:
            return rng.choice(["", "{", "[]", "null", "\x00\xff", '{"type":', "7"])
        body = {"type": rng.choice(types)}
        for _ in range(rng.randint(0, 4)):
            body[
                rng.choice(
                    ["session", "audio", "item", "item_id", "response", "audio_end_ms", "event_id", "x"]
                )
            ] = rng.choice(junk)
        return json.dumps(body)

    async with raw(rt_cluster) as ws:
        s = RawSession(ws)
        await s.until("session.created")
        for _ in range(200):
            await s.send(event())
        # after all that, a well-formed event is answered promptly
        await s.send(
            {"type": "session.update", "session": {"instructions": "still here?"}, "event_id": "last"}
        )
        while True:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 15))
            if msg["type"] == "session.updated" and msg["session"]["instructions"] == "still here?":
                break
            # every complaint on the way was about the client's events, none a server fault
            assert msg["type"] != "error" or msg["error"]["type"] == "invalid_request_error", msg
    # and the worker is free for the next session
    async with raw(rt_cluster) as ws:
        assert (await RawSession(ws).until("session.created"))["type"] == "session.created"


async def test_telephony_formats_and_beta_event_names(rt_cluster):
    """A beta-protocol client on G.711 mu-law: flat session fields in, beta event names out."""
    import base64

    from omnivox.audio.g711 import ulaw_decode, ulaw_encode
    from omnivox.audio.resample import resample

    phone = resample(np.concatenate([silence(0.3), speech(WEATHER), silence(1.0)]), 24000, 8000)
    async with raw(rt_cluster, **{"OpenAI-Beta": "realtime=v1"}) as ws:
        s = RawSession(ws)
        await s.until("session.created")
        await s.send(
            {
                "type": "session.update",
                "session": {
                    "input_audio_format": "g711_ulaw",
                    "output_audio_format": "g711_ulaw",
                    "turn_detection": {"type": "server_vad", "silence_duration_ms": 400},
                    "voice": "alloy",  # not a voice here: the default one speaks
                },
            }
        )
        updated = await s.until("session.updated")
        audio_cfg = updated["session"]["audio"]
        assert audio_cfg["input"]["format"] == {"type": "audio/pcmu", "rate": 8000}
        assert audio_cfg["output"]["format"]["type"] == "audio/pcmu"
        assert audio_cfg["input"]["turn_detection"]["silence_duration_ms"] == 400
        step = 160  # 20 ms at 8 kHz, one byte per sample
        for i in range(0, len(phone), step):
            await s.send(
                {
                    "type": "input_audio_buffer.append",
                    "audio": base64.b64encode(ulaw_encode(phone[i : i + step])).decode(),
                }
            )
        done = await s.until("response.done", timeout=20)
    kinds = [m["type"] for m in s.seen]
    assert "response.audio.delta" in kinds and "response.output_audio.delta" not in kinds
    assert "conversation.item.created" in kinds and "response.audio_transcript.done" in kinds
    heard = next(m for m in s.seen if m["type"] == "conversation.item.input_audio_transcription.completed")
    # telephone audio is band-limited to 4 kHz and the embedded model is a 16 kHz one: fewer words land
    assert word_error_rate(WEATHER, heard["transcript"]) <= 0.5 and "weather" in heard["transcript"]
    reply = np.concatenate(
        [ulaw_decode(base64.b64decode(m["delta"])) for m in s.seen if m["type"] == "response.audio.delta"]
    )
    assert done["response"]["status"] == "completed"
    assert len(reply) > 8000 and np.sqrt(np.mean(reply**2)) > 0.01  # over a second at 8 kHz, not silence


async def test_a_worker_dying_mid_session_is_reported_and_nothing_leaks(tmp_path):
    with cluster(
        workers=1, engine="cascade", log_dir=tmp_path, OMNIVOX_OFFLINE_AFTER_FAILURES="1", **ECHO_VOICE
    ) as c:
        async with raw(c, Authorization="Bearer x") as ws:  # no api key on this cluster
            s = RawSession(ws)
            await s.until("session.created")
            assert c.health()["workers_idle"] == 0
            c.workers[0].kill()
            lost = await s.until("error", timeout=10)
            assert lost["error"]["code"] == "worker_lost" and lost["error"]["type"] == "server_error"
            await asyncio.wait_for(ws.wait_closed(), 5)
            assert ws.close_code == 1011

        def left() -> tuple[dict, int]:
            """The worker as the gateway has it, and how many sessions it lists."""
            workers = httpx.get(c.url + "/api/workers").json()["workers"]
            return workers[0], httpx.get(c.url + "/api/sessions").json()["active_sessions"]

        # the gateway lets the session go after the client saw it closed (its taps finish first):
        # wait for it (10 s at most), then say what is left
        deadline = time.monotonic() + 10
        while True:
            worker, active = left()
            if (worker["state"] == "OFFLINE" and active == 0) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert worker["state"] == "OFFLINE" and worker["ticket_id"] is None
        assert active == 0
        # a new worker joins and takes the next session
        c.add_worker("cascade")
        c.wait_idle(1)
        async with raw(c) as ws:
            assert (await RawSession(ws).until("session.created"))["type"] == "session.created"


def trimmed(audio: np.ndarray) -> np.ndarray:
    loud = np.nonzero(np.abs(audio) > 0.02)[0]
    return audio[loud[0] : loud[-1] + 1]


async def test_a_pause_that_is_not_the_end_of_the_turn_discards_the_prepared_reply(rt_cluster):
    """A reply is prepared during a pause (to answer sooner); speech resuming drops it unheard."""
    first, second = "turn on the light", "in the kitchen please"
    gap = silence(0.45)  # long enough to prepare a reply (pause prediction 0.6), too short to end the turn
    audio = np.concatenate([silence(0.3), trimmed(speech(first)), gap, trimmed(speech(second)), silence(1.2)])
    async with client(rt_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await stream(conn, audio, chunk_ms=20, speed=2)
        done = await events.wait_for("response.done")
        await asyncio.sleep(0.5)
        await events.stop()
    assert len(events.of("input_audio_buffer.speech_started")) == 1  # one turn, not two
    assert len(events.of("response.created")) == 1 and done.response.status == "completed"
    heard = events.of("conversation.item.input_audio_transcription.completed")[0].transcript
    assert word_error_rate(f"{first} {second}", heard) <= 0.34
    reply = done.response.output[0].content[0].transcript
    assert reply == f"You said: {heard}"  # the reply answers all of it, not the first half


async def test_idle_timeout_prompts_the_user_and_speed_changes_the_pace(rt_cluster):
    async with client(rt_cluster.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        vad = {"type": "server_vad", "idle_timeout_ms": 1000}
        await conn.session.update(session={"type": "realtime", "audio": {"input": {"turn_detection": vad}}})
        await events.wait_for("session.updated")
        words = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "one two three"}],
        }
        await conn.conversation.item.create(item=words)
        await conn.response.create()
        normal = await events.wait_for("response.done")
        # nobody speaks: a second after the reply has played, the server prompts the user
        silence_feed = asyncio.create_task(stream(conn, silence(6.0), chunk_ms=100))
        timeout = await events.wait_for("input_audio_buffer.timeout_triggered", timeout=10)
        prompt = await events.wait_for("response.done", count=2)
        silence_feed.cancel()
        assert timeout.audio_end_ms > timeout.audio_start_ms
        first_audio = events.times("response.output_audio.delta")[0]  # playback starts here...
        played_until = first_audio + len(audio_of(events, normal.response.id)) / 24000  # ...and ends here
        assert events.times("input_audio_buffer.timeout_triggered")[0] >= played_until + 0.9
        assert prompt.response.status == "completed"

        await conn.session.update(session={"type": "realtime", "audio": {"output": {"speed": 1.5}}})
        await events.wait_for("session.updated", count=2)
        await conn.conversation.item.create(item=words)
        await conn.response.create()
        fast = await events.wait_for("response.done", count=3)
        await events.stop()
    slow_s = len(audio_of(events, normal.response.id)) / 24000
    fast_s = len(audio_of(events, fast.response.id)) / 24000
    assert fast.response.output[0].content[0].transcript == normal.response.output[0].content[0].transcript
    assert fast_s < 0.8 * slow_s  # the same words, said faster
