"""The benchmarks' shared caller: a reply timed as the caller hears it, a microphone that sends what
it records, and a conversation paced as a person's (a pause once each reply has been heard)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from omnivox.bench import paced_caller
from omnivox.bench.paced_caller import CallerStats, Microphone, ReplyTimer, converse, pacing, resample_clip

RATE = 1000  # a small rate keeps the clips short; the timer and microphone take any


def pcm(samples: int, level: int = 0) -> np.ndarray:
    return np.full(samples, level, np.int16)


def test_a_reply_is_timed_at_its_first_audio_and_heard_at_its_first_sound_as_it_plays():
    stats = CallerStats()
    timer = ReplyTimer(stats, RATE)
    timer.expect_reply(10.0)
    timer.audio(pcm(500), now=10.4)  # 0.5 s of silence, plays 10.4-10.9
    sound = pcm(500)
    sound[100:] = 5000
    timer.audio(sound, now=10.5)  # arrived early: queued behind the first, its sound plays at 11.0
    assert stats.v2v_s == [pytest.approx(0.4)] and stats.heard_s == [pytest.approx(1.0)]
    timer.reply_finished(now=10.6)
    assert timer.playing_until == pytest.approx(11.4)
    assert not timer.heard(11.0) and timer.heard(11.4)


def test_audio_after_the_player_ran_dry_plays_on_arrival():
    stats = CallerStats()
    timer = ReplyTimer(stats, RATE)
    timer.expect_reply(0.0)
    timer.audio(pcm(100), now=1.0)  # plays 1.0-1.1
    timer.audio(pcm(100, 4000), now=3.0)  # the player waited for it
    assert stats.heard_s == [pytest.approx(3.0)]


def test_the_gaps_a_reply_leaves_once_it_began_to_play_are_counted_per_reply():
    stats = CallerStats()
    timer = ReplyTimer(stats, RATE)
    timer.expect_reply(0.0)
    timer.audio(pcm(100), now=1.0)  # plays 1.0-1.1
    timer.audio(pcm(100), now=1.11)  # 10 ms late: jitter, not a gap
    timer.audio(pcm(100), now=1.5)  # the player ran dry 1.21-1.5
    timer.reply_finished(now=1.6)
    timer.expect_reply(2.0)
    timer.audio(pcm(100), now=2.5)  # the next reply's wait for its first audio is not a gap
    timer.audio(pcm(100), now=2.55)
    timer.reply_finished(now=2.6)
    assert stats.dry_s == [pytest.approx(0.29), 0.0]


def test_only_the_first_reply_after_a_turn_is_timed():
    stats = CallerStats()
    timer = ReplyTimer(stats, RATE)
    timer.expect_reply(0.0)
    timer.audio(pcm(10, 4000), now=0.5)
    timer.reply_finished(now=0.6)
    timer.audio(pcm(10, 4000), now=2.0)  # a second reply nobody asked for
    assert stats.v2v_s == [pytest.approx(0.5)] and len(stats.heard_s) == 1


def test_a_reply_with_no_audio_is_heard_when_it_is_over():
    timer = ReplyTimer(CallerStats(), RATE)
    timer.expect_reply(0.0)
    assert not timer.heard(5.0)
    timer.reply_finished(now=5.0)
    assert timer.heard(5.0) and timer.stats.v2v_s == []


async def test_the_microphone_sends_what_it_records_a_chunk_at_a_time():
    sent: list[np.ndarray] = []

    async def send(chunk: np.ndarray) -> None:
        sent.append(chunk)

    mic = Microphone(send, RATE, chunk_ms=20)
    await mic.play(np.ones(50, np.float32))
    assert [len(c) for c in sent] == [20, 20, 10] and mic.sent == 50
    assert mic.clock() == pytest.approx(mic.start + 0.05)


async def test_a_noise_floor_under_everything_the_microphone_sends():
    sent: list[np.ndarray] = []

    async def send(chunk: np.ndarray) -> None:
        sent.append(chunk)

    mic = Microphone(send, 8000, chunk_ms=100, noise_db=-60.0)
    silence = np.zeros(8000, np.float32)
    await mic.play(silence)
    heard = np.concatenate(sent)
    assert heard.dtype == np.float32 and len(heard) == 8000 and not silence.any()  # not in place
    assert 10 * np.log10(np.mean(heard.astype(np.float64) ** 2)) == pytest.approx(-60.0, abs=0.5)
    sent.clear()
    await Microphone(send, 8000, chunk_ms=100).play(silence)
    assert not np.concatenate(sent).any()  # by default, digital zeros


class Server:
    """Answers each sentence of ``sentence_len`` samples once the microphone has sent all of it."""

    def __init__(self, timer: ReplyTimer, sentence_len: int, answer: bool = True) -> None:
        self.timer = timer
        self.sentence_len = sentence_len
        self.answer = answer
        self.heard: list[np.ndarray] = []
        self.speech = 0  # samples of speech heard

    async def receive(self, chunk: np.ndarray) -> None:
        self.heard.append(chunk)
        self.speech += int(np.count_nonzero(chunk))
        if self.answer and chunk.any() and self.speech % self.sentence_len == 0:
            self.timer.audio(pcm(10, 4000), time.monotonic())
            self.timer.reply_finished(time.monotonic())


async def test_a_conversation_says_each_sentence_after_the_reply_and_a_pause():
    stats = CallerStats()
    timer = ReplyTimer(stats, RATE)
    server = Server(timer, 20)
    mic = Microphone(server.receive, RATE, chunk_ms=10)
    clip = np.ones(20, np.float32)
    await converse(mic, timer, [(clip, 0.02)], turns=2, pause_s=0.05)
    assert len(stats.v2v_s) == 2 and stats.errors == []
    audio = np.concatenate(server.heard)
    speech = np.flatnonzero(audio)
    # the second sentence comes after at least the pause's silence, not straight after the first
    gap = speech[20] - speech[19] - 1
    assert speech[19] == 19 and gap >= 50
    assert len(audio) >= 20 + 50 + 20 + 50  # each turn ends with the pause


async def test_a_turn_never_answered_is_an_error_and_the_next_turn_follows(monkeypatch):
    monkeypatch.setattr(paced_caller, "REPLY_TIMEOUT_S", 0.05)
    stats = CallerStats()
    timer = ReplyTimer(stats, RATE)
    server = Server(timer, 10, answer=False)
    mic = Microphone(server.receive, RATE, chunk_ms=10)
    await converse(mic, timer, [(np.ones(10, np.float32), 0.01)], turns=2, pause_s=0.0)
    assert stats.errors == ["timeout: no reply within 0 s"] * 2
    assert sum(int(c.any()) for c in server.heard) == 2  # both sentences were still said


async def test_a_reply_over_before_any_of_its_audio_came_is_an_error():
    stats = CallerStats()
    timer = ReplyTimer(stats, RATE)

    async def receive(chunk: np.ndarray) -> None:
        if chunk.any():
            timer.reply_finished(time.monotonic())  # "done", with nothing said

    mic = Microphone(receive, RATE, chunk_ms=10)
    await converse(mic, timer, [(np.ones(10, np.float32), 0.01)], turns=1, pause_s=0.0)
    assert stats.errors == ["reply over without audio"] and stats.v2v_s == []


def test_the_tables_say_how_callers_are_paced():
    assert "paced as people" in pacing(0.5) and "0.5 s after the reply" in pacing(0.5)


def test_a_clip_resampled_keeps_its_speech_end():
    audio = np.zeros(2400, np.float32)
    audio[:1200] = 0.5
    resampled, end_s = resample_clip((audio, 0.05), 16000)
    assert len(resampled) == 1600 and end_s == 0.05 and resampled.dtype == np.float32
    assert resample_clip((audio, 0.05), paced_caller.RATE)[0] is audio
