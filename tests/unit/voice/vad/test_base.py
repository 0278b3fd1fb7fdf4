"""The VAD contract: audio in any chunking -> one probability per whole window, partial windows kept
for the next call, and reset separating streams."""

from __future__ import annotations

import itertools

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from omnivox.core.errors import InvalidAudio
from omnivox.voice.vad.base import VoiceActivityDetector


class _Recording(VoiceActivityDetector):
    """Scores each window by its first sample and remembers every window it was given."""

    sample_rate = 8000
    window_samples = 4

    def __init__(self) -> None:
        super().__init__()
        self.windows_seen: list[np.ndarray] = []
        self.resets = 0

    def _score(self, window: np.ndarray) -> float:
        assert window.dtype == np.float32 and window.flags.c_contiguous
        self.windows_seen.append(window.copy())
        return float(window[0])

    def _reset_state(self) -> None:
        self.resets += 1


def ramp(n: int, start: int = 0) -> np.ndarray:
    return (np.arange(start, start + n) / 1000).astype(np.float32)


def test_window_and_audio_times() -> None:
    vad = _Recording()
    assert vad.window_ms == 0.5 and vad.audio_ms == 0.0 and vad.windows == 0
    vad.process(ramp(10))
    assert vad.windows == 2 and vad.audio_ms == 1.0  # the end of the last whole window


def test_whole_windows_are_scored_and_the_rest_is_kept() -> None:
    vad = _Recording()
    probs = vad.process(ramp(10))
    assert probs.dtype == np.float32 and probs.tolist() == pytest.approx([0.0, 0.004])
    assert len(vad.process(ramp(1, 10))) == 0  # 3 samples pending: no window yet
    assert vad.process(ramp(1, 11)).tolist() == pytest.approx([0.008])
    assert [w.tolist() for w in vad.windows_seen] == [ramp(4, i).tolist() for i in (0, 4, 8)]


def test_an_empty_chunk_scores_nothing_and_keeps_the_partial_window() -> None:
    vad = _Recording()
    vad.process(ramp(3))
    assert vad.process(np.zeros(0, np.float32)).shape == (0,)
    assert vad.process(ramp(1, 3)).tolist() == pytest.approx([0.0])


def test_reset_drops_the_partial_window_and_the_count() -> None:
    vad = _Recording()
    vad.process(ramp(7))
    vad.reset()
    assert vad.windows == 0 and vad.audio_ms == 0.0 and vad.resets == 1
    vad.process(ramp(4, 100))
    assert vad.windows_seen[-1].tolist() == ramp(4, 100).tolist()  # no leftover from before


def test_int16_audio_is_scaled() -> None:
    vad = _Recording()
    assert vad.process(np.array([16384, 0, 0, 0], np.int16)).tolist() == [0.5]


@pytest.mark.parametrize(
    "audio",
    [np.zeros((4, 2), np.float32), np.array([np.nan] * 4, np.float32), np.array([1, 2, 3, 4], np.int64)],
)
def test_what_is_not_audio_is_rejected_and_leaves_the_state_alone(audio: np.ndarray) -> None:
    vad = _Recording()
    vad.process(ramp(2))
    with pytest.raises(InvalidAudio):
        vad.process(audio)
    assert vad.process(ramp(2, 2)).tolist() == pytest.approx([0.0]) and vad.windows == 1


def test_the_callers_buffer_is_not_kept() -> None:
    vad = _Recording()
    chunk = ramp(6)
    vad.process(chunk)
    chunk[:] = 9.0  # the transport reuses its buffer
    assert vad.process(ramp(2, 6)).tolist() == pytest.approx([0.004])


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 60), st.lists(st.integers(0, 60), max_size=8))
def test_any_chunking_gives_the_same_windows(n: int, cuts: list[int]) -> None:
    audio = ramp(n)
    whole = _Recording()
    ref = whole.process(audio)
    vad = _Recording()
    bounds = [0, *sorted(c for c in cuts if c < n), n]
    got = np.concatenate([vad.process(audio[a:b]) for a, b in itertools.pairwise(bounds)])
    assert np.array_equal(got, ref) and len(ref) == n // 4
    assert vad.windows == whole.windows == n // 4
