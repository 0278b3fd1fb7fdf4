"""The embedded models end to end: hibari speaks, PocketSphinx hears it, the VAD finds it."""

from __future__ import annotations

import numpy as np

from omnivox.audio.resample import StreamResampler
from omnivox.voice.asr.base import word_error_rate
from omnivox.voice.vad.silero import SileroVad
from omnivox.voice.vad.turn import TurnDetector, TurnEventType, TurnParams, TurnState
from speech import WEATHER

RATE = 16000
FRAME = RATE // 50  # 20 ms


def speech_bounds_ms(audio: np.ndarray, rate: int) -> tuple[float, float]:
    """Where speech is, from the waveform: 10 ms frames within 40 dB of the loudest frame."""
    hop = rate // 100
    frames = audio[: len(audio) // hop * hop].reshape(-1, hop)
    rms = np.sqrt(np.mean(frames.astype(np.float64) ** 2, axis=1)) + 1e-12
    loud = np.nonzero(20 * np.log10(rms / rms.max()) > -40)[0]
    return loud[0] * 10.0, (loud[-1] + 1) * 10.0


def test_streaming_asr_recognises_hibari_speech(asr, weather_24k) -> None:
    # the way a live session hears it: 20 ms frames at 24 kHz, resampled on the fly to 16 kHz
    resampler = StreamResampler(24000, RATE)
    partials = []
    step = 24000 // 50
    for i in range(0, len(weather_24k), step):
        p = asr.feed(resampler.process(weather_24k[i : i + step]))
        if p is not None:
            partials.append(p)
    asr.feed(resampler.flush())
    final = asr.flush()
    assert final.final and word_error_rate(WEATHER, final.text) <= 0.10
    assert len(partials) >= 3 and not any(p.final for p in partials)  # it streamed as it heard
    assert partials[-1].text.split()[:3] == final.text.split()[:3]
    # word times are increasing and inside the audio
    starts = [w.start_ms for w in final.words]
    assert starts == sorted(starts) and final.words[-1].end_ms <= len(weather_24k) / 24 + 20


def test_turn_detector_finds_the_speech_in_padded_audio(weather_16k) -> None:
    pad_before, pad_after = int(1.3 * RATE), int(1.5 * RATE)
    audio = np.concatenate([np.zeros(pad_before, np.float32), weather_16k, np.zeros(pad_after, np.float32)])
    true_start, true_end = speech_bounds_ms(audio, RATE)
    vad = SileroVad(RATE)
    detector = TurnDetector(TurnParams(silence_duration_ms=500), vad.window_ms)
    events = []
    for i in range(0, len(audio), FRAME):
        events += detector.push_many(vad.process(audio[i : i + FRAME]))
    assert [e.type for e in events] == [TurnEventType.SPEECH_STARTED, TurnEventType.SPEECH_STOPPED]
    started, stopped = events
    assert abs(started.speech_ms - true_start) <= 100
    assert abs(stopped.speech_ms - true_end) <= 100
    # reported once the silence window has passed, and the padded start leads the speech
    assert stopped.detected_ms >= stopped.speech_ms + 500
    assert started.audio_ms == max(0.0, started.speech_ms - 300)
    assert detector.state is TurnState.SILENCE and detector.pause_prediction == 1.0
