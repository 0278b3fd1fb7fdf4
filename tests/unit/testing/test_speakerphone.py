"""The speakerphone on tiny arrays: the reply plays in real time and comes back into the microphone
``delay`` samples later at ``gain``; pauses, drops and back-to-back replies."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.testing.speakerphone import Speakerphone


def phone(rate: int = 1000, delay_ms: float = 3.0, gain_db: float = 0.0) -> Speakerphone:
    return Speakerphone(rate=rate, delay_ms=delay_ms, gain_db=gain_db)


def test_delay_is_in_samples_of_the_rate():
    assert phone(rate=24000, delay_ms=80).delay == 1920
    assert phone(rate=1000, delay_ms=3.9).delay == 3  # truncated, not rounded
    assert phone(delay_ms=0).delay == 0


def test_gain_is_decibels_as_amplitude():
    assert phone(gain_db=0).gain == pytest.approx(1.0)
    assert phone(gain_db=-20).gain == pytest.approx(0.1)
    assert phone(gain_db=-6).gain == pytest.approx(0.501, abs=1e-3)
    assert phone(gain_db=6).gain == pytest.approx(1.995, abs=1e-3)


def test_gain_at_or_below_minus_120_db_is_silence():
    assert phone(gain_db=-120).gain == 0.0
    assert phone(gain_db=-200).gain == 0.0
    assert phone(gain_db=-119).gain > 0.0


def test_an_idle_speaker_records_only_the_voice():
    p = phone()
    voice = np.array([0.1, -0.2, 0.3, 0.0], np.float32)
    out = p.record(voice)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, voice)
    assert not p.playing and p.queued == 0 and p.played == {}


def test_the_echo_comes_back_delay_samples_later():
    p = phone(delay_ms=3.0)
    p.play("r1", np.array([1, 2, 3, 4, 5], np.float32))
    first = p.record(np.zeros(4, np.float32))
    second = p.record(np.zeros(4, np.float32))
    np.testing.assert_allclose(first, [0, 0, 0, 1])
    np.testing.assert_allclose(second, [2, 3, 4, 5])
    assert p.played == {"r1": 5}
    assert not p.playing


def test_the_echo_is_attenuated_and_added_to_the_voice():
    p = phone(delay_ms=0.0, gain_db=-20.0)
    p.play("r", np.ones(3, np.float32))
    out = p.record(np.full(3, 0.5, np.float32))
    np.testing.assert_allclose(out, [0.6, 0.6, 0.6], rtol=1e-6)


def test_zero_delay_echoes_the_same_chunk():
    p = phone(delay_ms=0.0)
    p.play("r", np.array([0.25, 0.5], np.float32))
    np.testing.assert_allclose(p.record(np.zeros(3, np.float32)), [0.25, 0.5, 0.0])


def test_a_muted_speaker_still_plays_but_echoes_nothing():
    p = phone(delay_ms=0.0, gain_db=-150.0)
    p.play("r", np.ones(4, np.float32))
    out = p.record(np.zeros(4, np.float32))
    np.testing.assert_array_equal(out, np.zeros(4, np.float32))
    assert p.played == {"r": 4}


def test_replies_play_back_to_back_across_chunks():
    p = phone(delay_ms=0.0)
    p.play("a", np.array([1, 1, 1], np.float32))
    p.play("b", np.array([2, 2, 2], np.float32))
    assert p.queued == 6 and p.playing
    np.testing.assert_allclose(p.record(np.zeros(4, np.float32)), [1, 1, 1, 2])
    assert p.played == {"a": 3, "b": 1} and p.queued == 2
    assert (p.left("a"), p.left("b"), p.left("c")) == (0, 2, 0)
    np.testing.assert_allclose(p.record(np.zeros(4, np.float32)), [2, 2, 0, 0])
    assert p.played == {"a": 3, "b": 3} and p.queued == 0


def test_a_paused_speaker_plays_nothing_and_keeps_its_queue():
    p = phone(delay_ms=0.0)
    p.play("r", np.array([1, 2, 3, 4], np.float32))
    p.record(np.zeros(1, np.float32))
    p.paused = True
    assert not p.playing and p.queued == 3
    np.testing.assert_allclose(p.record(np.zeros(2, np.float32)), [0, 0])
    assert p.played == {"r": 1}
    p.paused = False
    assert p.playing
    np.testing.assert_allclose(p.record(np.zeros(3, np.float32)), [2, 3, 4])


def test_pausing_does_not_cut_the_echo_already_in_the_air():
    p = phone(delay_ms=2.0)
    p.play("r", np.array([5, 6], np.float32))
    np.testing.assert_allclose(p.record(np.zeros(2, np.float32)), [0, 0])
    p.paused = True
    np.testing.assert_allclose(p.record(np.zeros(3, np.float32)), [5, 6, 0])


def test_drop_removes_only_that_replys_unplayed_audio():
    p = phone(delay_ms=0.0)
    p.play("a", np.array([1, 1], np.float32))
    p.play("b", np.array([2, 2], np.float32))
    p.play("a", np.array([3], np.float32))
    p.drop("a")
    assert p.queued == 2
    np.testing.assert_allclose(p.record(np.zeros(3, np.float32)), [2, 2, 0])
    assert "a" not in p.played


def test_drop_of_a_half_played_reply_keeps_its_played_count():
    p = phone(delay_ms=0.0)
    p.play("a", np.arange(1, 6, dtype=np.float32))
    p.record(np.zeros(2, np.float32))
    p.drop("a")
    assert p.queued == 0 and p.played == {"a": 2}
    np.testing.assert_allclose(p.record(np.zeros(2, np.float32)), [0, 0])


def test_drop_of_an_unknown_reply_is_harmless():
    p = phone()
    p.play("a", np.ones(2, np.float32))
    p.drop("zzz")
    assert p.queued == 2


def test_play_converts_to_float32():
    p = phone(delay_ms=0.0)
    p.play("r", np.array([1, 2], np.float64))
    out = p.record(np.zeros(2, np.float64))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [1, 2])


def test_an_empty_chunk_records_nothing_and_keeps_the_history():
    p = phone(delay_ms=2.0)
    p.play("r", np.array([7, 8], np.float32))
    assert len(p.record(np.zeros(0, np.float32))) == 0
    np.testing.assert_allclose(p.record(np.zeros(4, np.float32)), [0, 0, 7, 8])


def test_a_long_recording_echoes_the_whole_reply_once():
    p = phone(delay_ms=5.0)
    reply = np.linspace(0.1, 1.0, 10).astype(np.float32)
    p.play("r", reply)
    out = np.concatenate([p.record(np.zeros(3, np.float32)) for _ in range(7)])
    np.testing.assert_allclose(out[5:15], reply, rtol=1e-6)
    assert not out[:5].any() and not out[15:].any()
