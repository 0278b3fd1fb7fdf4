"""The turn detector on synthetic VAD probabilities: OpenAI server_vad semantics, in audio time."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.voice.vad.base import VoiceActivityDetector
from omnivox.voice.vad.turn import (
    TurnDetector,
    TurnEvent,
    TurnEventType,
    TurnParams,
    TurnState,
    VadTurnDetector,
)

W = 32.0  # window ms, as Silero at 16 kHz
STARTED, STOPPED = TurnEventType.SPEECH_STARTED, TurnEventType.SPEECH_STOPPED


def probs(*runs: tuple[float, float]) -> list[float]:
    """Probabilities from (value, milliseconds) runs."""
    out: list[float] = []
    for value, ms in runs:
        out += [value] * round(ms / W)
    return out


def test_one_utterance_gives_start_and_stop_at_the_speech_edges() -> None:
    d = TurnDetector(TurnParams(threshold=0.5, prefix_padding_ms=300, silence_duration_ms=512), W)
    events = d.push_many(probs((0.05, 1024), (0.9, 960), (0.02, 1024)))
    assert events == [
        TurnEvent(STARTED, speech_ms=1024, audio_ms=724, detected_ms=1056),
        TurnEvent(STOPPED, speech_ms=1984, audio_ms=1984, detected_ms=1984 + 512),
    ]
    assert d.state is TurnState.SILENCE


def test_a_pause_shorter_than_the_silence_window_does_not_end_the_turn() -> None:
    d = TurnDetector(TurnParams(silence_duration_ms=500), W)
    events = d.push_many(probs((0.9, 640), (0.1, 448), (0.9, 640), (0.1, 640)))
    assert [e.type for e in events] == [STARTED, STOPPED]
    assert events[1].speech_ms == 640 + 448 + 640


def test_hysteresis_band_neither_starts_nor_ends_a_silence_run() -> None:
    d = TurnDetector(TurnParams(threshold=0.5, hysteresis=0.15, silence_duration_ms=320), W)
    d.push_many(probs((0.9, 320)))
    # 0.4 is between 0.35 and 0.5: still speech as far as the silence run is concerned
    assert d.push_many(probs((0.4, 640))) == []
    assert d.pause_prediction == 0.0
    events = d.push_many(probs((0.2, 320)))
    assert [(e.type, e.speech_ms) for e in events] == [(STOPPED, 960)]


def test_pause_prediction_rises_through_the_silence_window() -> None:
    d = TurnDetector(TurnParams(silence_duration_ms=640), W)
    assert d.pause_prediction == 1.0  # nobody speaking
    d.push_many(probs((0.9, 320)))
    assert d.pause_prediction == 0.0
    seen = []
    for p in probs((0.0, 640)):
        if d.push(p) is None:
            seen.append(d.pause_prediction)
    assert seen == sorted(seen) and seen[0] == pytest.approx(W / 640) and seen[-1] < 1.0
    assert d.pause_prediction == 1.0 and d.state is TurnState.SILENCE
    d.push(0.9)
    assert d.pause_prediction == 0.0  # speech resets it


def test_prefix_padding_is_clamped_to_the_stream_start_and_the_previous_turn() -> None:
    d = TurnDetector(TurnParams(prefix_padding_ms=500, silence_duration_ms=320), W)
    first = d.push_many(probs((0.0, 96), (0.9, 320), (0.0, 320)))
    assert first[0].audio_ms == 0.0  # 96 - 500 would be before the stream began
    second = d.push_many(probs((0.0, 64), (0.9, 320)))
    stop_of_first = first[1].speech_ms
    assert second[0].speech_ms == stop_of_first + 320 + 64
    assert second[0].audio_ms == stop_of_first  # not reaching back into the first turn


def test_the_answer_does_not_depend_on_how_windows_are_batched() -> None:
    rng = np.random.default_rng(0)
    ps = np.clip(np.repeat(rng.uniform(0, 1, 60) > 0.5, 8) + rng.normal(0, 0.2, 480), 0, 1)
    whole = TurnDetector(window_ms=W).push_many(ps)
    one_by_one = TurnDetector(window_ms=W)
    events = [e for p in ps if (e := one_by_one.push(float(p))) is not None]
    assert events == whole and len(whole) >= 2
    assert [e.type for e in whole] == [STARTED, STOPPED] * (len(whole) // 2) + [STARTED] * (len(whole) % 2)


def test_reset_returns_to_silence_at_time_zero() -> None:
    d = TurnDetector(window_ms=W)
    d.push_many(probs((0.9, 320)))
    d.reset()
    assert d.state is TurnState.SILENCE and d.audio_ms == 0.0
    assert d.push(0.9) == TurnEvent(STARTED, 0.0, 0.0, W)


@pytest.mark.parametrize(
    "kwargs", [{"threshold": 0.0}, {"threshold": 1.5}, {"silence_duration_ms": 0}, {"hysteresis": 0.6}]
)
def test_bad_params_are_rejected(kwargs) -> None:
    with pytest.raises(ValueError):
        TurnParams(**kwargs)


class _LoudnessVad(VoiceActivityDetector):
    """A stand-in VAD: probability = peak amplitude of the window (tests the plumbing, not a model)."""

    sample_rate = 16000
    window_samples = 512

    def __init__(self) -> None:
        super().__init__()
        self.resets = 0

    def _score(self, window: np.ndarray) -> float:
        assert len(window) == 512
        return float(np.max(np.abs(window)))

    def _reset_state(self) -> None:
        self.resets += 1


def test_vad_windows_are_cut_from_any_chunking() -> None:
    audio = np.concatenate([np.zeros(8192), np.full(8192, 0.9), np.zeros(16384)]).astype(np.float32)
    ref = _LoudnessVad().process(audio)
    vad = _LoudnessVad()
    chunks = [vad.process(audio[i : i + 300]) for i in range(0, len(audio), 300)]
    assert np.array_equal(np.concatenate(chunks), ref) and vad.windows == len(ref) == 64
    turn = VadTurnDetector(_LoudnessVad(), TurnParams(silence_duration_ms=320))
    events = [e for i in range(0, len(audio), 320) for e in turn.feed(audio[i : i + 320])]
    assert [(e.type, e.speech_ms) for e in events] == [(STARTED, 512.0), (STOPPED, 1024.0)]
    turn.reset()
    assert turn.vad.resets == 1 and turn.vad.windows == 0 and turn.turns.audio_ms == 0
