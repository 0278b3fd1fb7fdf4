"""bench turns without its models: the audio helpers, where the first stop falls, the scripted sets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from omnivox.bench import turns
from omnivox.voice.listener import Heard


def test_trim_cuts_the_quiet_at_both_ends():
    audio = np.zeros(100, np.float32)
    audio[20] = 0.5
    audio[60] = -0.1
    trimmed = turns.trim(audio)
    assert len(trimmed) == 41 and trimmed[0] == 0.5 and trimmed[-1] == pytest.approx(-0.1)


def test_trim_keeps_all_quiet_audio_as_it_is():
    quiet = np.full(50, 0.01, np.float32)  # under the threshold everywhere
    assert turns.trim(quiet) is quiet


def test_quiet_is_silence_at_16k():
    q = turns.quiet(0.25)
    assert q.dtype == np.float32 and len(q) == 4000 and not q.any()


class ScriptedListener:
    """Says ``speech_stopped`` on the n-th frame fed (never, if None); records the frame sizes."""

    def __init__(self, stop_on: int | None) -> None:
        self.stop_on = stop_on
        self.sizes: list[int] = []

    def feed(self, audio: np.ndarray) -> list[Heard]:
        self.sizes.append(len(audio))
        if len(self.sizes) == self.stop_on:
            return [Heard("speech_started"), Heard("speech_stopped")]
        return [Heard("speech_started")] if len(self.sizes) == 1 else []


def test_first_stop_is_the_end_of_the_frame_that_ended_the_turn():
    listener = ScriptedListener(stop_on=3)
    assert turns.first_stop_ms(listener, np.zeros(16000, np.float32)) == 60.0
    assert listener.sizes == [320, 320, 320]  # 20 ms frames, and nothing fed after the stop


def test_first_stop_counts_a_short_last_frame_by_its_length():
    listener = ScriptedListener(stop_on=2)
    assert turns.first_stop_ms(listener, np.zeros(320 + 160, np.float32)) == 30.0


def test_no_stop_is_none():
    listener = ScriptedListener(stop_on=None)
    assert turns.first_stop_ms(listener, np.zeros(1600, np.float32)) is None
    assert len(listener.sizes) == 5


def test_the_deaf_recogniser_hears_nothing():
    deaf = turns.DeafAsr()
    assert deaf.feed(np.ones(1600, np.float32) * 0.3) is None
    final = deaf.flush()
    assert final.text == "" and final.final and final.words == ()


def test_the_scripted_sets_are_whole_sentences():
    assert len(turns.COMPLETE) == len(turns.PAUSED) == 8
    assert all(t[-1] in ".?" for t in turns.COMPLETE)
    assert all(rest[-1] in ".?" and first[-1] not in ".?" for first, rest in turns.PAUSED)
    assert turns.MODES[0] == "server_vad" and math.isclose(turns.PAUSE_S, 1.0)
