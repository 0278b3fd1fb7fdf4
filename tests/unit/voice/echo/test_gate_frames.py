"""The echo gate on synthetic frames: constant levels, so each 20 ms frame's fate is known exactly
(gated, passed, held open), and the adaptive threshold's learning and reset."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.voice.echo import gate as gate_module
from omnivox.voice.echo.base import EchoCanceller
from omnivox.voice.echo.choice import build_canceller
from omnivox.voice.echo.gate import FRAME, EchoGate, percentile_of_sorted


def level(value: float, frames: int = 1) -> np.ndarray:
    return np.full(frames * FRAME, value, np.float32)


def frames_of(gate: EchoGate, near: np.ndarray, ref: np.ndarray, chunk: int = FRAME) -> np.ndarray:
    out = [gate.process(near[i : i + chunk], ref[i : i + chunk]) for i in range(0, len(near), chunk)]
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def passed(out: np.ndarray) -> list[bool]:
    return [bool(out[i : i + FRAME].any()) for i in range(0, len(out), FRAME)]


def test_factor_must_be_positive():
    with pytest.raises(ValueError, match="factor"):
        EchoGate(factor=0)
    with pytest.raises(ValueError, match="factor"):
        EchoGate(factor=-0.5)


def test_the_gate_is_an_echo_canceller_at_16_khz():
    g = EchoGate()
    assert isinstance(g, EchoCanceller) and g.sample_rate == 16000
    g.close()  # nothing to release


def test_window_and_hold_in_frames_and_samples():
    g = EchoGate(window_ms=400, hold_ms=200)
    assert g._window == 20 and g._hold == 3200
    assert EchoGate(window_ms=1)._window == 1  # never under one frame
    assert EchoGate(window_ms=0)._window == 1


def test_the_threshold_starts_at_the_factor():
    assert EchoGate(factor=0.5).threshold() == 0.5
    assert EchoGate().threshold() == 0.7


def test_with_no_reference_everything_passes_untouched():
    g = EchoGate()
    near = np.linspace(-0.01, 0.01, 3 * FRAME).astype(np.float32)
    out = g.process(near, np.zeros_like(near))
    np.testing.assert_array_equal(out, near)
    assert g.gated == 0 and g.loudest() == 0.0


def test_a_reference_below_the_silent_level_gates_nothing():
    g = EchoGate()
    out = g.process(level(0.0001, 2), level(0.0002, 2))
    assert out.all() and g.gated == 0


def test_the_input_is_not_modified_in_place():
    g = EchoGate(adaptive=False)
    near = level(0.01, 2)
    out = g.process(near, level(0.5, 2))
    assert not out.any()
    assert (near == np.float32(0.01)).all()


def test_quiet_input_under_a_loud_reply_is_silenced_and_counted():
    g = EchoGate(adaptive=False)
    out = g.process(level(0.1, 3), level(0.5, 3))
    assert not out.any()
    assert g.gated == 3 * FRAME


def test_input_at_the_threshold_passes():
    g = EchoGate(factor=0.5, adaptive=False)
    out = g.process(level(0.25, 1), level(0.5, 1))
    assert out.all() and g.gated == 0


def test_loud_input_over_a_reply_passes_unchanged():
    g = EchoGate(adaptive=False)
    near = level(0.4, 2)
    out = g.process(near, level(0.5, 2))
    np.testing.assert_array_equal(out, near)


def test_lengths_must_match_even_for_empty_near():
    g = EchoGate()
    with pytest.raises(ValueError, match="same length"):
        g.process(np.zeros(0, np.float32), np.zeros(1, np.float32))
    assert len(g.process(np.zeros(0, np.float32), np.zeros(0, np.float32))) == 0


def test_a_user_keeps_the_gate_open_for_the_hold():
    g = EchoGate(adaptive=False, hold_ms=100)  # 1600 samples: five frames
    near = np.concatenate([level(0.5, 1), level(0.05, 8)])
    out = frames_of(g, near, level(0.5, 9))
    assert passed(out) == [True, True, True, True, True, True, False, False, False]


def test_no_hold_over_an_inaudible_reply():
    g = EchoGate(adaptive=False, hold_ms=200)
    ref = level(0.005, 3)  # heard, but under the audible level
    near = np.concatenate([level(0.005, 1), level(0.001, 2)])
    out = frames_of(g, near, ref)
    assert passed(out) == [True, False, False]


def test_the_window_remembers_the_loudest_recent_reference():
    g = EchoGate(adaptive=False, window_ms=100)  # five frames
    ref = np.concatenate([level(0.5, 1), level(0.0, 7)])
    near = level(0.1, 8)
    out = frames_of(g, near, ref)
    # the loud frame gates, and so do the five after it (it is still in the window of the five
    # frames before each); then it has passed out of the window
    assert passed(out) == [False, False, False, False, False, False, True, True]
    assert g.loudest() == 0.0


def test_loudest_is_the_rms_of_the_loudest_frame():
    g = EchoGate()
    ref = np.concatenate([level(0.2, 1), level(0.3, 1), level(0.1, 1)])
    g.process(np.zeros_like(ref), ref)
    assert g.loudest() == pytest.approx(0.3)


def test_frames_are_stream_aligned_across_uneven_chunks():
    g = EchoGate(adaptive=False)
    ref = level(0.5, 3)
    near = level(0.1, 3)
    out = frames_of(g, near, ref, chunk=100)
    assert not out.any() and g.gated == 3 * FRAME
    assert len(g._refs) == 3 and g._part == 0


def test_a_partial_frame_counts_its_own_reference_at_once():
    g = EchoGate(adaptive=False)
    out = g.process(np.full(100, 0.1, np.float32), np.full(100, 0.5, np.float32))
    assert not out.any()
    assert g._part == 100 and len(g._refs) == 0


def test_the_threshold_learns_a_quiet_echo_and_lets_a_soft_voice_through():
    g = EchoGate()  # factor 0.7, margin 2
    ref = level(0.5, 30)
    echo = level(0.025, 30)  # -26 dB: coupling 0.05
    out = frames_of(g, echo, ref)
    assert not out.any()
    assert g.threshold() == pytest.approx(0.1)  # 2 x 0.05
    soft = frames_of(g, level(0.1, 1), level(0.5, 1))  # -14 dB: under the factor, over the echo
    assert soft.all()


def test_the_learnt_threshold_is_not_used_before_enough_frames():
    g = EchoGate()
    frames_of(g, level(0.05, gate_module._LEARNT - 1), level(0.5, gate_module._LEARNT - 1))
    assert g.threshold() == 0.7
    frames_of(g, level(0.05, 1), level(0.5, 1))
    assert g.threshold() == pytest.approx(0.2)


def test_the_learnt_threshold_never_goes_under_the_floor():
    g = EchoGate()
    frames_of(g, level(0.001, 30), level(0.5, 30))
    assert g.threshold() == pytest.approx(gate_module._FLOOR)


def test_the_learnt_threshold_never_goes_over_the_factor():
    g = EchoGate(factor=0.3, margin=10.0)
    frames_of(g, level(0.1, 30), level(0.5, 30))  # coupling 0.2: x10 would be 2.0
    assert g.threshold() == pytest.approx(0.3)


def test_a_fixed_gate_does_not_learn():
    g = EchoGate(adaptive=False)
    frames_of(g, level(0.025, 40), level(0.5, 40))
    assert g.threshold() == 0.7 and len(g._echo) == 0


def test_partial_blocks_do_not_teach_the_gate():
    g = EchoGate()
    frames_of(g, level(0.025, 30), level(0.5, 30), chunk=FRAME // 2)
    assert len(g._echo) == 0 and g.threshold() == 0.7


def test_an_inaudible_reply_does_not_teach_the_gate():
    g = EchoGate()
    frames_of(g, level(0.0005, 30), level(0.005, 30))
    assert len(g._echo) == 0 and len(g._passed) == 0


def test_passing_frames_do_not_raise_the_threshold():
    g = EchoGate(hold_ms=0)
    frames_of(g, level(0.025, 30), level(0.5, 30))
    assert g.threshold() == pytest.approx(0.1)
    frames_of(g, level(0.4, 10), level(0.5, 10))  # the user, talking over the reply
    assert g.threshold() == pytest.approx(0.1)
    assert len(g._echo) == 30


def test_an_echo_that_grew_louder_restarts_from_the_factor():
    g = EchoGate(hold_ms=0)
    frames_of(g, level(0.025, 30), level(0.5, 30))
    assert g.threshold() == pytest.approx(0.1)
    # now most audible frames pass (the echo is louder than the learnt threshold)
    frames_of(g, level(0.2, 50), level(0.5, 50))
    assert g.threshold() == 0.7
    # it started again: what it gated since is too little to use yet
    assert len(g._echo) < gate_module._LEARNT


def test_build_canceller_kinds():
    assert build_canceller("none") is None
    g = build_canceller("gate", gate_factor=0.4)
    assert isinstance(g, EchoGate) and g.factor == 0.4
    with pytest.raises(ValueError, match="unknown echo canceller"):
        build_canceller("bogus")  # type: ignore[arg-type]


@pytest.mark.parametrize("n", [1, 2, 3, 24, 25, 26, 149, 150])
def test_the_percentile_of_a_sorted_window_is_numpys_to_the_last_bit(n: int) -> None:
    rng = np.random.default_rng(n)
    for scale in (1e-3, 1.0, 30.0):
        values = (rng.random(n) * scale).tolist()
        for q in (0.95, 0.5, 0.05, 0.0, 1.0):
            assert percentile_of_sorted(sorted(values), q) == float(np.percentile(values, 100 * q))


def test_the_sorted_window_follows_the_learnt_frames_through_evictions_and_restarts() -> None:
    g = EchoGate(hold_ms=0)
    rng = np.random.default_rng(7)
    # 400 echo frames of varying coupling (the window of 150 turns over), then a louder echo
    # that passes (a restart), then more echo: the threshold is numpy's percentile throughout
    near = np.concatenate([level(float(v)) for v in rng.uniform(0.01, 0.2, 400)])
    frames_of(g, near, level(0.5, 400))
    assert len(g._echo) == gate_module._LEARN and sorted(g._echo) == g._echo_sorted
    want = min(0.7, max(gate_module._FLOOR, 2.0 * float(np.percentile(list(g._echo), 95))))
    assert g.threshold() == want
    frames_of(g, level(0.45, 60), level(0.5, 60))
    assert g._echo_sorted == sorted(g._echo) and len(g._echo) < gate_module._LEARNT
    frames_of(g, level(0.02, 40), level(0.5, 40))
    assert g._echo_sorted == sorted(g._echo)
    assert g.threshold() == min(0.7, max(gate_module._FLOOR, 2.0 * float(np.percentile(list(g._echo), 95))))
