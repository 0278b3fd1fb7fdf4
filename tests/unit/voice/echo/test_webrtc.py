"""WebRTC's AEC3 (from the livekit wheel) behind the canceller contract, on real speech."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.audio.resample import resample
from omnivox.voice.echo.webrtc import WebRtcEchoCanceller
from omnivox.voice.tts.hibari import HibariTts


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    tts = HibariTts(seed=0)
    audio = np.concatenate([c.audio for c in tts.synthesize("the weather in paris is sunny all day long")])
    return resample(audio, 24000, 16000)


def db(x: np.ndarray) -> float:
    return 10 * np.log10(float(np.mean(x * x)) + 1e-12)


def run(canceller: WebRtcEchoCanceller, near: np.ndarray, ref: np.ndarray, chunk: int = 320) -> np.ndarray:
    out = [canceller.process(near[i : i + chunk], ref[i : i + chunk]) for i in range(0, len(near), chunk)]
    return np.concatenate(out)


def test_the_echo_of_the_reply_is_taken_out(speech) -> None:
    delay = int(0.08 * 16000)  # 80 ms late, 10 dB down: a speakerphone
    echo = np.concatenate([np.zeros(delay, np.float32), speech[:-delay]]) * 10 ** (-10 / 20)
    out = run(WebRtcEchoCanceller(), echo, speech)
    settled = slice(len(out) // 2, None)  # after the adaptive filter converged
    assert db(echo[settled]) - db(out[settled]) > 15


def test_speech_with_no_reference_passes_unchanged(speech) -> None:
    canceller = WebRtcEchoCanceller(idle_ms=100)
    out = run(canceller, speech, np.zeros_like(speech))
    assert np.allclose(out[160:], speech[: len(out) - 160], atol=1e-6)  # one 10 ms frame of lag
    assert canceller.frames == 0  # never reached the module


def test_lengths_must_match() -> None:
    with pytest.raises(ValueError):
        WebRtcEchoCanceller().process(np.zeros(10, np.float32), np.zeros(11, np.float32))
