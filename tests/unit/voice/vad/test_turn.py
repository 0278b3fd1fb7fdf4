"""The turn detector on synthetic VAD probabilities: OpenAI server_vad semantics, in audio time."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from omnivox.core.errors import IllegalTransition
from omnivox.voice.vad.base import VoiceActivityDetector
from omnivox.voice.vad.turn import (
    TurnDetector,
    TurnEvent,
    TurnEventType,
    TurnParams,
    TurnState,
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
    vad = _LoudnessVad()
    turn = TurnDetector(TurnParams(silence_duration_ms=320), vad.window_ms)
    events = [e for i in range(0, len(audio), 320) for e in turn.push_many(vad.process(audio[i : i + 320]))]
    assert [(e.type, e.speech_ms) for e in events] == [(STARTED, 512.0), (STOPPED, 1024.0)]
    vad.reset()
    assert vad.resets == 1 and vad.windows == 0


def test_event_names_are_openais() -> None:
    assert STARTED == "speech_started" and STOPPED == "speech_stopped"
    assert TurnState.SILENCE.value == "silence" and TurnState.SPEECH.value == "speech"
    assert TurnParams() == TurnParams(threshold=0.5, prefix_padding_ms=300, silence_duration_ms=500)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threshold": -0.1},
        {"prefix_padding_ms": -1},
        {"silence_duration_ms": -32},
        {"hysteresis": -0.01},
        {"threshold": 0.3, "hysteresis": 0.3},  # the silence level would be 0
    ],
)
def test_more_bad_params_are_rejected(kwargs) -> None:
    with pytest.raises(ValueError):
        TurnParams(**kwargs)


@pytest.mark.parametrize(
    "kwargs", [{"threshold": 1.0}, {"prefix_padding_ms": 0}, {"silence_duration_ms": 1}, {"hysteresis": 0.0}]
)
def test_edge_params_are_accepted(kwargs) -> None:
    TurnParams(**kwargs)


@pytest.mark.parametrize("window_ms", [0.0, -32.0])
def test_window_length_must_be_positive(window_ms: float) -> None:
    with pytest.raises(ValueError):
        TurnDetector(window_ms=window_ms)


def test_the_threshold_itself_counts_as_speech() -> None:
    d = TurnDetector(TurnParams(threshold=0.5), W)
    assert d.push(0.4999) is None
    assert d.push(0.5) == TurnEvent(STARTED, W, 0.0, 2 * W)


def test_exactly_threshold_minus_hysteresis_is_not_silence() -> None:
    d = TurnDetector(TurnParams(threshold=0.5, hysteresis=0.25, silence_duration_ms=64), W)
    d.push(0.9)
    assert d.push_many([0.25] * 10) == []  # 0.25 is not below 0.5 - 0.25
    assert [e.type for e in d.push_many([0.2499] * 2)] == [STOPPED]


def test_a_silence_run_goes_on_through_in_between_windows() -> None:
    d = TurnDetector(TurnParams(threshold=0.5, hysteresis=0.15, silence_duration_ms=320), W)
    d.push_many(probs((0.9, 320)))
    assert d.push_many(probs((0.1, 96), (0.4, 160))) == []  # 0.4 neither starts nor ends the run
    assert d.pause_prediction == pytest.approx(256 / 320)
    (event,) = d.push_many(probs((0.4, 64)))
    assert event.type is STOPPED and event.speech_ms == 320 and event.detected_ms == 320 + 320


def test_a_loud_window_ends_a_silence_run() -> None:
    d = TurnDetector(TurnParams(silence_duration_ms=320), W)
    d.push_many(probs((0.9, 320), (0.0, 288)))
    assert d.pause_prediction == pytest.approx(288 / 320)
    d.push(0.9)
    assert d.pause_prediction == 0.0 and d.state is TurnState.SPEECH
    (event,) = d.push_many(probs((0.0, 320)))
    assert event.speech_ms == 320 + 288 + W  # the new run, not the interrupted one


def test_reset_turn_ends_the_turn_silently_and_the_clock_runs_on() -> None:
    d = TurnDetector(TurnParams(prefix_padding_ms=300, silence_duration_ms=320), W)
    d.push_many(probs((0.9, 640)))
    d.reset_turn()  # the client committed the buffer by hand
    assert d.state is TurnState.SILENCE and d.pause_prediction == 1.0 and d.audio_ms == 640
    assert d.push_many(probs((0.0, 320))) == []  # no late speech_stopped for that turn
    (started,) = d.push_many(probs((0.9, 64)))
    assert started.speech_ms == 960 and started.audio_ms == 660  # 300 ms of padding, not before 640
    d2 = TurnDetector(TurnParams(prefix_padding_ms=300), W)
    d2.push_many(probs((0.9, 64)))
    d2.reset_turn()
    assert d2.push_many(probs((0.0, 32), (0.9, 32)))[0].audio_ms == 64  # clamped at the commit


def test_reset_turn_in_silence_only_moves_the_padding_limit() -> None:
    d = TurnDetector(TurnParams(prefix_padding_ms=300), W)
    d.push_many(probs((0.0, 640)))
    d.reset_turn()
    assert d.state is TurnState.SILENCE
    assert d.push(0.9).audio_ms == 640  # type: ignore[union-attr]


def test_moves_outside_the_table_are_illegal() -> None:
    d = TurnDetector(window_ms=W)
    with pytest.raises(IllegalTransition):
        d._move(TurnState.SILENCE)
    d.push(0.9)
    with pytest.raises(IllegalTransition):
        d._move(TurnState.SPEECH)


def test_the_clock_is_windows_times_window_ms() -> None:
    d = TurnDetector(window_ms=10.0)
    d.push_many([0.0] * 7)
    assert d.audio_ms == 70.0
    d.push_many(np.array([0.0, 1.0], np.float32))  # numpy scalars are accepted
    assert d.audio_ms == 90.0 and d.state is TurnState.SPEECH


PARAMS = st.builds(
    TurnParams,
    threshold=st.sampled_from([0.3, 0.5, 0.8]),
    prefix_padding_ms=st.sampled_from([0, 100, 300]),
    silence_duration_ms=st.sampled_from([32, 100, 500]),
    hysteresis=st.sampled_from([0.0, 0.1, 0.25]),
)


@settings(max_examples=300, deadline=None)
@given(PARAMS, st.lists(st.sampled_from([0.0, 0.2, 0.3, 0.45, 0.5, 0.6, 0.9, 1.0]), max_size=120))
def test_turn_events_invariants(params: TurnParams, ps: list[float]) -> None:
    d = TurnDetector(params, W)
    timeline = []
    for i, p in enumerate(ps):
        event = d.push(p)
        assert d.audio_ms == (i + 1) * W
        assert 0.0 <= d.pause_prediction <= 1.0
        assert (d.pause_prediction == 1.0) if d.state is TurnState.SILENCE else (d.pause_prediction < 1.0)
        if event is not None:
            assert event.detected_ms == d.audio_ms
            timeline.append(event)
    # events alternate, starting with a start
    assert [e.type for e in timeline] == [STARTED, STOPPED] * (len(timeline) // 2) + [STARTED] * (
        len(timeline) % 2
    )
    assert (d.state is TurnState.SPEECH) == (len(timeline) % 2 == 1)
    last_stop = 0.0
    for e in timeline:
        if e.type is STARTED:
            assert ps[round(e.speech_ms / W)] >= params.threshold  # it began at a loud window
            assert e.audio_ms == max(last_stop, e.speech_ms - params.prefix_padding_ms, 0.0)
            assert e.detected_ms == e.speech_ms + W
            start = e.speech_ms
        else:
            assert e.audio_ms == e.speech_ms > start
            assert e.detected_ms - e.speech_ms >= params.silence_duration_ms
            assert e.detected_ms - e.speech_ms < params.silence_duration_ms + W  # reported at once
            quiet = ps[round(e.speech_ms / W) : round(e.detected_ms / W)]
            assert quiet[0] < params.threshold - params.hysteresis and max(quiet) < params.threshold
            last_stop = e.speech_ms


def test_require_pause_sets_the_current_pause_only() -> None:
    d = TurnDetector(TurnParams(silence_duration_ms=2048), W)
    d.push_many(probs((0.9, 640), (0.02, 128)))
    assert d.pause_started_ms == 640 and d.pause_ms == 128
    d.require_pause(256)
    assert d.pause_prediction == 0.5
    assert d.push_many(probs((0.02, 96))) == []
    (stop,) = d.push_many(probs((0.02, 32)))
    assert stop.type is STOPPED and stop.detected_ms == 640 + 256
    # the next turn's pause starts from silence_duration_ms again
    d.push_many(probs((0.9, 320), (0.02, 1024)))
    assert d.required_ms == 2048 and d.state is TurnState.SPEECH
    # speech resuming within a shortened pause puts the full length back
    d.require_pause(64)
    d.push_many(probs((0.9, 32)))
    assert d.required_ms == 2048 and d.pause_started_ms is None and d.pause_ms == 0


def test_eagerness_is_checked() -> None:
    assert TurnParams(eagerness="auto").eagerness == "auto"
    with pytest.raises(ValueError):
        TurnParams(eagerness="eager")


def test_a_pause_dated_sooner_ends_the_turn_its_silence_after_that_date() -> None:
    det = TurnDetector(TurnParams(silence_duration_ms=500, prefix_padding_ms=0), W)
    assert det.push_many(probs((0.9, 640))) and det.pause_started_ms is None
    det.date_pause(100.0)  # no pause: nothing to date
    assert det.pause_started_ms is None
    det.push(0.1)  # the pause begins at 640 ms, per the VAD
    assert det.pause_started_ms == 640.0
    det.date_pause(700.0)  # never later
    assert det.pause_started_ms == 640.0
    det.date_pause(544.0)  # the energy fell at 544 ms
    assert det.pause_started_ms == 544.0 and det.pause_ms == 672.0 - 544.0
    events = det.push_many([0.1] * 20)
    assert [e.type for e in events] == [STOPPED]
    assert events[0].audio_ms == 544.0 and events[0].detected_ms == 1056.0  # first window end >= 1044


def test_a_pause_is_never_dated_into_the_previous_turn() -> None:
    det = TurnDetector(TurnParams(silence_duration_ms=64, prefix_padding_ms=0), W)
    det.push_many(probs((0.9, 320), (0.1, 128)))  # a turn that stopped at 320 ms
    det.push_many(probs((0.9, 64)))  # the next one, at 448 ms
    det.push(0.1)  # its pause at 512 ms
    det.date_pause(0.0)
    assert det.pause_started_ms == 320.0
