"""Speech over the assistant, end to end: the official openai SDK against a real gateway and cascade worker.

The worker hears with silero VAD and Whisper (it hears no words in a cough, and "mm hmm" as
"Mm-hmm"), answers with the echo LLM ("You said: ...", so the whole reply is known) and speaks with
hibari. The client plays the reply through a speakerphone (``testing.speakerphone``) where a test
needs its echo, and honours ``omnivox.interruption.paused`` / ``.resumed`` as the bench's caller does.
"""

from __future__ import annotations

import asyncio
import base64
import time

import numpy as np
import pytest

from cluster import cluster
from omnivox.audio.pcm import b64_to_pcm16, to_pcm16
from omnivox.audio.resample import resample
from omnivox.testing.speakerphone import Speakerphone
from rtclient import OMNIVOX_EVENTS, Events, audio_of, client, silence, speech
from voices import espeak_ng

STORY = "tell me a long story about a brave little fox who lived in the forest by the river"
WEATHER = "what is the weather like in paris today"
RATE = 24000


@pytest.fixture(scope="module")
def quality_cluster(tmp_path_factory):
    env = {"OMNIVOX_API_KEY": "secret", "OMNIVOX_LLM": "echo", "OMNIVOX_ASR": "whisper"}
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("quality"), **env) as c:
        yield c


@pytest.fixture(autouse=True)
def idle_worker(quality_cluster):
    quality_cluster.wait_idle(1, timeout=15)


def espeak(text: str) -> np.ndarray:
    return resample(espeak_ng(text), 16000, RATE)


class Caller:
    """A microphone paced in real time with a speakerphone, over the SDK connection."""

    def __init__(self, conn, events: Events, echo_db: float | None = None) -> None:
        self.conn = conn
        self.events = events
        self.phone = Speakerphone(RATE, 80.0, echo_db if echo_db is not None else -200.0)
        self.say: list[np.ndarray] = []
        self._seen = 0

    async def run(self, seconds: float) -> None:
        """Keep the microphone open for ``seconds``, saying what is queued in ``say``."""
        step = RATE * 40 // 1000
        start = time.monotonic()
        for n in range(int(seconds * 1000 / 40)):
            self._listen()
            voice = np.zeros(step, np.float32)
            if self.say:
                part = self.say[0][:step]
                voice[: len(part)] = part
                self.say[0] = self.say[0][step:]
                if not len(self.say[0]):
                    self.say.pop(0)
            chunk = self.phone.record(voice)
            await asyncio.sleep(max(0.0, start + (n + 1) * 0.04 - time.monotonic()))
            await self.conn.input_audio_buffer.append(audio=base64.b64encode(to_pcm16(chunk)).decode())

    def _listen(self) -> None:
        for _, e in self.events.seen[self._seen :]:
            kind = e.type
            if kind == "response.output_audio.delta":
                self.phone.play(e.response_id, b64_to_pcm16(e.delta))
            elif kind == "omnivox.interruption.paused":
                self.phone.paused = True
            elif kind == "omnivox.interruption.resumed":
                self.phone.paused = False
            elif kind == "response.done" and e.response.status == "cancelled":
                self.phone.drop(e.response.id)
        self._seen = len(self.events.seen)


async def _ask(conn, events: Events, caller: Caller, text: str) -> str:
    """Say ``text`` and return the id of the reply once its audio has begun."""
    caller.say.append(np.concatenate([speech(text), silence(0.2)]))
    talk = asyncio.create_task(caller.run(60))
    first = await events.wait_for("response.output_audio.delta", timeout=30)
    caller._talk = talk  # type: ignore[attr-defined]
    return first.response_id


async def _played(caller: Caller, rid: str, seconds: float) -> None:
    for _ in range(1000):
        if caller.phone.played.get(rid, 0) >= seconds * RATE:
            return
        await asyncio.sleep(0.04)


async def _finish(caller: Caller, events: Events) -> None:
    caller._talk.cancel()  # type: ignore[attr-defined]
    await asyncio.gather(caller._talk, return_exceptions=True)  # type: ignore[attr-defined]
    await events.stop()


def _whole(events: Events, done) -> None:  # type: ignore[no-untyped-def]
    """The reply was said to its end: completed, not truncated, its transcript the whole answer."""
    assert done.response.status == "completed"
    assert done.response.output[0].status == "completed"
    assert not events.of("conversation.item.truncated")
    heard = events.of("conversation.item.input_audio_transcription.completed")[0].transcript
    transcript = done.response.output[0].content[0].transcript
    assert transcript == f"You said: {heard}"


async def test_the_assistants_own_echo_does_not_interrupt_it(quality_cluster):
    async with client(quality_cluster.ws).realtime.connect(
        model="omnivox", extra_query=OMNIVOX_EVENTS
    ) as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        caller = Caller(conn, events, echo_db=-10.0)  # every reply comes back 80 ms later at -10 dB
        rid = await _ask(conn, events, caller, STORY)
        done = await events.wait_for("response.done", response__id=rid, timeout=40)
        await _played(caller, rid, len(audio_of(events, rid)) / RATE - 0.1)
        await asyncio.sleep(1.0)  # its echo's tail has been heard too
        await _finish(caller, events)
    _whole(events, done)
    assert not events.of("omnivox.interruption.paused")  # the echo gate kept it from the VAD: no pause
    assert len(events.of("response.created")) == 1  # its echo made no turn
    assert len(events.of("input_audio_buffer.committed")) == 1


async def test_mhm_over_the_reply_is_kept_and_does_not_interrupt(quality_cluster):
    async with client(quality_cluster.ws).realtime.connect(
        model="omnivox", extra_query=OMNIVOX_EVENTS
    ) as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        caller = Caller(conn, events)
        rid = await _ask(conn, events, caller, STORY)
        await _played(caller, rid, 1.0)
        caller.say.append(espeak("mm hmm"))
        done = await events.wait_for("response.done", response__id=rid, timeout=40)
        judged = await events.wait_for("omnivox.interruption.judged")
        if judged.verdict == "backchannel":  # heard as words: kept in the conversation
            committed = await events.wait_for(
                "conversation.item.input_audio_transcription.completed", count=2
            )
            assert "hmm" in committed.transcript.lower()
        await _finish(caller, events)
    _whole(events, done)
    # Whisper tiny hears espeak's hum either as "Mm-hmm" or as no speech at all: either way the reply
    # plays on (a no-speech hum leaves nothing in the conversation)
    assert judged.action == "resume" and judged.verdict in ("backchannel", "no_speech", "unclear"), judged
    assert len(events.of("response.created")) == 1  # and it asked for no reply
    resumed = events.of("omnivox.interruption.resumed")
    assert all(r.reason == judged.verdict for r in resumed)  # paused at most for that judgement


async def test_a_cough_pauses_the_reply_then_it_resumes_and_is_received_whole(quality_cluster):
    async with client(quality_cluster.ws).realtime.connect(
        model="omnivox", extra_query=OMNIVOX_EVENTS
    ) as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        caller = Caller(conn, events)
        rid = await _ask(conn, events, caller, STORY)
        await _played(caller, rid, 1.0)
        caller.say.append(espeak("[[h@@]]"))  # a breathy cough: voiced, no words
        paused = await events.wait_for("omnivox.interruption.paused", response_id=rid)
        resumed = await events.wait_for("omnivox.interruption.resumed", response_id=rid)
        done = await events.wait_for("response.done", response__id=rid, timeout=40)
        await _finish(caller, events)
    assert resumed.reason == "no_words" and resumed.audio_start_ms == paused.audio_end_ms
    _whole(events, done)
    # audio came after the resume: the client has every sample of the reply, once
    times = [
        t for t, e in events.seen if getattr(e, "response_id", None) == rid and e.type.endswith("audio.delta")
    ]
    resumed_at = next(t for t, e in events.seen if e is resumed)
    assert times[-1] > resumed_at
    assert not events.of("input_audio_buffer.committed")[1:]  # the cough made no item


async def test_a_real_sentence_over_the_reply_interrupts_and_truncates_it(quality_cluster):
    async with client(quality_cluster.ws).realtime.connect(
        model="omnivox", extra_query=OMNIVOX_EVENTS
    ) as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        caller = Caller(conn, events)
        rid = await _ask(conn, events, caller, STORY)
        await _played(caller, rid, 1.0)
        caller.say.append(speech(WEATHER))
        paused = await events.wait_for("omnivox.interruption.paused", response_id=rid)
        done = await events.wait_for("response.done", response__id=rid, timeout=30)
        truncated = await events.wait_for("conversation.item.truncated", item_id=paused.item_id)
        second = await events.wait_for("response.done", count=2, timeout=30)
        await _finish(caller, events)
    assert done.response.status == "cancelled" and done.response.status_details.reason == "turn_detected"
    assert truncated.audio_end_ms == paused.audio_end_ms  # cut where its audio stopped
    assert not events.of("omnivox.interruption.resumed")
    kept = done.response.output[0].content[0].transcript
    assert kept and "river" not in kept  # only what was heard
    assert "weather" in second.response.output[0].content[0].transcript
