"""Pieces of a realtime session: listener (real VAD + ASR), conversation, outbox, units, audio I/O."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import pytest

from omnivox.audio.g711 import alaw_encode, ulaw_decode
from omnivox.audio.pcm import to_pcm16
from omnivox.audio.resample import resample
from omnivox.core.errors import InvalidAudio, ItemNotFound
from omnivox.protocol import realtime as rt
from omnivox.protocol.realtime_session import AudioFormat
from omnivox.voice.asr.base import word_error_rate
from omnivox.voice.vad.turn import TurnParams
from omnivox.worker.realtime.audio_io import InputDecoder, OutputEncoder
from omnivox.worker.realtime.conversation import Conversation, Item
from omnivox.worker.realtime.listener import Listener
from omnivox.worker.realtime.outbox import Outbox
from omnivox.worker.realtime.units import WorkUnits

WEATHER = "what is the weather like in paris today"


@pytest.fixture(scope="module")
def models():
    from omnivox.voice.asr.pocketsphinx_asr import PocketsphinxAsr
    from omnivox.voice.tts.hibari import HibariTts
    from omnivox.voice.vad.silero import SileroVad

    speech = np.concatenate([c.audio for c in HibariTts(seed=0).synthesize(WEATHER)])
    return SileroVad(16000), PocketsphinxAsr(), resample(speech, 24000, 16000)


def hear(listener: Listener, audio: np.ndarray, frame: int = 320) -> list:
    out = []
    for i in range(0, len(audio), frame):
        out += listener.feed(audio[i : i + frame])
    return out


def test_listener_hears_a_turn_with_padding_confirmation_and_transcript(models) -> None:
    vad, asr, speech = models
    vad.reset(), asr.reset()
    listener = Listener(vad, asr, TurnParams(silence_duration_ms=500, prefix_padding_ms=300), confirm_ms=150)
    audio = np.concatenate([np.zeros(16000, np.float32), speech, np.zeros(16000, np.float32)])
    heard = hear(listener, audio)
    kinds = [h.kind for h in heard]
    assert kinds[0] == "speech_started" and kinds[1] == "speech_confirmed"
    assert kinds[-2:] == ["speech_stopped", "final"] and "partial" in kinds
    started, stopped, final = heard[0], heard[-2], heard[-1]
    loud = np.nonzero(np.abs(audio) > 0.02)[0]
    true_start = loud[0] / 16  # ms
    assert true_start - 300 - 64 <= started.audio_ms <= true_start  # up to 300 ms of padding before it
    assert stopped.audio_ms < final.audio_ms  # the end of speech, reported once the silence has run
    assert word_error_rate(WEATHER, final.text) <= 0.1
    assert not listener.speaking and not asr.in_utterance


def test_a_pause_flushes_early_and_more_speech_resumes_the_same_turn(models) -> None:
    vad, asr, speech = models
    vad.reset(), asr.reset()
    listener = Listener(vad, asr, TurnParams(silence_duration_ms=500), confirm_ms=150, speculate_at=0.6)
    loud = np.nonzero(np.abs(speech) > 0.02)[0]
    words = speech[loud[0] : loud[-1] + 1]
    gap = np.zeros(int(0.45 * 16000), np.float32)
    heard = hear(listener, np.concatenate([gap, words, gap, words, np.zeros(16000, np.float32)]))
    kinds = [h.kind for h in heard]
    assert kinds.count("speech_started") == 1 and kinds.count("speech_stopped") == 1
    assert kinds.index("pause") < kinds.index("resumed") < kinds.index("speech_stopped")
    pause = heard[kinds.index("pause")]
    assert word_error_rate(WEATHER, pause.text) <= 0.1  # the first sentence, flushed at the pause
    final = heard[-1]
    assert final.kind == "final" and word_error_rate(f"{WEATHER} {WEATHER}", final.text) <= 0.2
    # the end of the turn gets its own early flush too: a reply is prepared before the stop
    assert kinds.count("pause") == 2 and kinds[-3:] == ["pause", "speech_stopped", "final"]


def test_a_click_is_not_confirmed_speech(models) -> None:
    vad, asr, speech = models
    vad.reset(), asr.reset()
    listener = Listener(vad, asr, TurnParams(), confirm_ms=150)
    click = speech[4000:5000]  # ~60 ms of a syllable, then silence
    heard = hear(listener, np.concatenate([np.zeros(8000, np.float32), click, np.zeros(16000, np.float32)]))
    assert "speech_confirmed" not in [h.kind for h in heard]


def test_manual_turns_feed_everything_and_commit_ends_the_utterance(models) -> None:
    vad, asr, speech = models
    vad.reset(), asr.reset()
    listener = Listener(vad, asr, None, confirm_ms=150)
    heard = hear(listener, speech)
    assert "speech_started" not in [h.kind for h in heard]
    assert listener.pending_samples == len(speech)
    final = listener.commit()
    assert final.kind == "final" and word_error_rate(WEATHER, final.text) <= 0.1
    assert listener.pending_samples == 0
    hear(listener, speech[:8000])
    listener.clear()
    assert listener.pending_samples == 0 and not asr.in_utterance


def test_conversation_orders_items_and_truncates_to_what_was_heard() -> None:
    conv = Conversation()
    a, b, c = Item("user", False, "one"), Item("assistant", True, "two"), Item("user", False, "three")
    assert conv.add(a) is None and conv.add(b) == a.id
    assert conv.add(c, previous_item_id="root") is None
    assert [i.id for i in conv] == [c.id, a.id, b.id]
    with pytest.raises(ItemNotFound):
        conv.add(Item("user", False, "x"), previous_item_id="item_missing")
    with pytest.raises(ItemNotFound):
        conv.add(Item("user", False, "dup", id=a.id))
    conv.delete(c.id)
    assert [m.content for m in conv.messages("sys")] == ["sys", "one", "two"]

    spoken = Item("assistant", True)
    spoken.spans = [(0.0, "Hello there."), (1000.0, "How are you doing today?")]
    spoken.audio_ms = 3000.0
    assert spoken.heard_text(500) == "Hello"
    assert spoken.heard_text(2000) == "Hello there. How are you"  # half of the second sentence
    spoken.truncate(1200)
    assert spoken.text == "Hello there. How" and spoken.audio_ms == 1200
    assert spoken.wire()["content"] == [{"type": "output_audio", "transcript": "Hello there. How"}]


async def test_outbox_drops_unsent_audio_of_a_cancelled_response_and_speaks_beta() -> None:
    sent: list[str] = []
    gate = asyncio.Event()

    async def send(payload: str) -> None:
        await gate.wait()
        sent.append(payload)

    box = Outbox(send, beta=True)
    task = asyncio.create_task(box.run())
    box.put(rt.AudioDelta(response_id="r1", item_id="i", delta="AA"), response_id="r1", audio_ms=100)
    box.put(rt.AudioDelta(response_id="r1", item_id="i", delta="BB"), response_id="r1", audio_ms=100)
    box.put(rt.AudioDelta(response_id="r2", item_id="i", delta="CC"), response_id="r2", audio_ms=100)
    box.put(rt.Cleared())
    await asyncio.sleep(0)  # the first delta is being written
    assert box.drop_audio("r1") == 100.0
    gate.set()
    await box.drain(1.0)
    task.cancel()
    events = [json.loads(s) for s in sent]
    assert [e["type"] for e in events] == [
        "response.audio.delta",
        "response.audio.delta",
        "input_audio_buffer.cleared",
    ]
    assert [e.get("delta") for e in events[:2]] == ["AA", "CC"]


async def test_units_replace_by_name_and_report_failures() -> None:
    failures = []
    units = WorkUnits(lambda name, exc: failures.append((name, str(exc))))
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            cancelled.set()

    async def broken() -> None:
        raise RuntimeError("bad")

    await units.start("response", forever())
    await asyncio.sleep(0)  # let it start
    assert units.running("response")
    await units.start("response", broken())  # replaces: the first is cancelled before this starts
    assert cancelled.is_set()
    await asyncio.sleep(0.01)
    assert failures == [("response", "bad")] and not units.running("response")
    await units.start("idle", forever())
    await units.close()
    assert not units.running("idle")


def test_audio_codecs_on_the_wire() -> None:
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(2400) / 24000)).astype(np.float32)
    pcm = InputDecoder(AudioFormat(type="audio/pcm", rate=24000), 16000)
    out = np.concatenate([pcm.decode(base64.b64encode(to_pcm16(tone)).decode()) for _ in range(5)])
    assert 7000 < len(out) <= 8000  # 0.5 s at 16 kHz, less the resampler's held-back tail
    alaw = InputDecoder(AudioFormat(type="audio/pcma"), 16000)
    assert alaw.format.rate == 8000
    assert len(alaw.decode(base64.b64encode(alaw_encode(np.tile(tone, 2))).decode())) > 0
    with pytest.raises(InvalidAudio):
        pcm.decode("@@@")
    opus_in = InputDecoder(AudioFormat(type="audio/opus"), 16000)
    assert len(opus_in.decode(base64.b64encode(b"junk before the first page").decode())) == 0  # joined late
    with pytest.raises(InvalidAudio):
        opus_in.decode(base64.b64encode(b"not ogg at all" * 2000).decode())

    ulaw = OutputEncoder(AudioFormat(type="audio/pcmu"))
    wire = base64.b64decode(ulaw.encode(tone)) + base64.b64decode(ulaw.flush())
    assert len(wire) == 800  # 100 ms at 8 kHz, one byte per sample
    back = ulaw_decode(wire)
    assert abs(float(np.sqrt(np.mean(back[100:-100] ** 2))) - 0.3 / np.sqrt(2)) < 0.03
    opus = OutputEncoder(AudioFormat(type="audio/opus"))
    first = base64.b64decode(opus.encode(np.tile(tone, 5)))
    assert first.startswith(b"OggS")  # a fresh Ogg stream, headers first
