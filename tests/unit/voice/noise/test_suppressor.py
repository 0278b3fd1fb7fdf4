"""WebRTC's noise suppressor on speech (hibari, espeak-ng) mixed with noise: Whisper hears it better,
and it delays the stream by its 10 ms frame and the suppressor's own 6 ms of overlap, no more."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.voice.asr.base import word_error_rate
from omnivox.voice.noise.suppressor import FRAME, NoiseSuppressor, build_suppressor
from speech import WEATHER


def pink(n: int, seed: int = 3) -> np.ndarray:
    spectrum = np.fft.rfft(np.random.default_rng(seed).standard_normal(n))
    spectrum[1:] /= np.sqrt(np.arange(1, len(spectrum)))
    spectrum[0] = 0
    return np.fft.irfft(spectrum, n).astype(np.float32)


def noisy(speech: np.ndarray, snr_db: float) -> np.ndarray:
    pad = np.zeros(8000, np.float32)
    clip = np.concatenate([pad, speech, pad])
    noise = pink(len(clip))
    gain = np.sqrt(np.mean(speech**2) / np.mean(noise**2) / 10 ** (snr_db / 10))
    return (clip + gain * noise).astype(np.float32)


def through(suppressor: NoiseSuppressor, audio: np.ndarray, chunk: int = 640) -> np.ndarray:
    return np.concatenate([suppressor.process(audio[i : i + chunk]) for i in range(0, len(audio), chunk)])


@pytest.fixture(scope="module")
def whisper():
    from omnivox.voice.asr.whisper_asr import WhisperAsr

    return WhisperAsr()


# where Whisper tiny.en starts to lose words in pink noise without it (hibari 0.5 WER at -5 dB, espeak
# 0.25 at 0 dB; both heard without an error through the suppressor)
@pytest.mark.parametrize(("voice", "snr_db"), [("hibari", -5.0), ("espeak", 0.0)])
def test_speech_in_pink_noise_is_recognised_better_through_the_suppressor(
    whisper, weather_16k, espeak, voice, snr_db
) -> None:
    speech = weather_16k if voice == "hibari" else espeak(WEATHER)
    mixed = noisy(speech, snr_db)
    raw = word_error_rate(WEATHER, whisper.transcribe(mixed).text)
    cleaned = word_error_rate(WEATHER, whisper.transcribe(through(NoiseSuppressor("near_field"), mixed)).text)
    assert cleaned <= 0.2 and cleaned < raw


@pytest.mark.parametrize("kind", ["near_field", "far_field"])
def test_the_suppressor_keeps_the_streams_length_and_delays_it_by_one_frame(weather_16k, kind) -> None:
    audio = weather_16k[:32000]
    out = through(NoiseSuppressor(kind), audio, chunk=333)  # chunks that are not whole frames
    assert len(out) == len(audio) and out.dtype == np.float32
    assert not out[:FRAME].any()  # the first frame out is the lag
    # the speech comes out one frame and the suppressor's overlap (96 samples, 6 ms) late: the
    # cross-correlation peaks there, under two frames
    lags = range(0, 4 * FRAME)
    best = max(lags, key=lambda k: float(np.dot(audio[: len(audio) - k], out[k:])))
    assert FRAME < best < 2 * FRAME


def test_noise_alone_comes_out_much_quieter() -> None:
    noise = (np.random.default_rng(0).standard_normal(16000 * 3) * 0.05).astype(np.float32)
    out = through(NoiseSuppressor("near_field"), noise)
    tail = slice(16000, None)  # after a second to learn the noise
    assert np.sqrt(np.mean(out[tail] ** 2)) < 0.5 * np.sqrt(np.mean(noise[tail] ** 2))


def test_an_unknown_kind_is_refused_and_none_means_no_suppressor() -> None:
    with pytest.raises(ValueError, match="near_field or far_field"):
        NoiseSuppressor("loud")  # type: ignore[arg-type]
    assert build_suppressor(None) is None
    assert isinstance(build_suppressor("far_field"), NoiseSuppressor)
