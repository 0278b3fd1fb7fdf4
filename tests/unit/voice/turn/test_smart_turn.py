"""smart-turn v3.2 (the ONNX from the pipecat-ai wheel) on hibari speech.

A complete sentence must score as more finished than the same recording cut mid-clause. The cut is
made in the audio, at a word boundary that Whisper's word times give, so the speech stops with the
intonation of an unfinished clause (a TTS asked to say half a sentence would end it like a whole one).
The clips end where the speech ends, as a VAD's speech-end gives them.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from omnivox.audio.resample import resample
from omnivox.voice.packaged import SMART_TURN_V3_ONNX
from omnivox.voice.turn.smart_turn import (
    N_FRAMES,
    N_MELS,
    N_SAMPLES,
    SmartTurn,
    last_window,
    log_mel_features,
    mel_filterbank,
)

SENTENCES = [
    "I would like to order a large pizza with mushrooms and olives.",
    "Turn off the lights in the kitchen and lock the front door.",
    "She walks along the beach every summer morning.",
    "My flight leaves in the evening from the north terminal.",
]


@pytest.fixture(scope="session")
def smart_turn() -> SmartTurn:
    return SmartTurn(threads=1)


@pytest.fixture(scope="session")
def complete_and_cut() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(sentence, the whole sentence, the same audio cut after its middle word), 16 kHz."""
    from omnivox.voice.asr.whisper_asr import WhisperAsr
    from omnivox.voice.tts.hibari import HibariTts

    tts = HibariTts(seed=0)
    aligner = WhisperAsr(word_timestamps=True)
    out = []
    for sentence in SENTENCES:
        audio = resample(np.concatenate([c.audio for c in tts.synthesize(sentence)]), 24000, 16000)
        aligner.reset()
        words = aligner.transcribe(audio).words
        assert len(words) >= 6
        end_of = [int(w.end_ms * 16) + 800 for w in words]  # each word's end plus 50 ms
        out.append((sentence, audio[: end_of[-1]], audio[: end_of[len(words) // 2 - 1]]))
    return out


def _reference_features():
    """pipecat's own numpy feature extractor, shipped next to the model (imports only numpy)."""
    path = SMART_TURN_V3_ONNX.path().parent.parent / "_whisper_features.py"
    spec = importlib.util.spec_from_file_location("pipecat_smart_turn_features", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute_whisper_log_mel_features


@pytest.mark.parametrize("seconds", [0.3, 3.0, 12.0])
def test_features_match_pipecats_preprocessing(seconds):
    reference = _reference_features()
    rng = np.random.default_rng(1)
    audio = (rng.standard_normal(int(16000 * seconds)) * 0.1).astype(np.float32)
    window = last_window(audio)
    ours = log_mel_features(window)
    assert ours.shape == (N_MELS, N_FRAMES) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, reference(window, do_normalize=True), atol=1e-4)


def test_the_window_is_the_last_8_s_padded_in_front():
    short = np.ones(16000, np.float32)
    window = last_window(short)
    assert window.shape == (N_SAMPLES,)
    assert not window[: N_SAMPLES - 16000].any() and window[-16000:].all()
    long = np.arange(N_SAMPLES + 500, dtype=np.float32)
    np.testing.assert_array_equal(last_window(long), long[-N_SAMPLES:])


def test_features_reject_a_wrong_length():
    with pytest.raises(ValueError, match="128000"):
        log_mel_features(np.zeros(16000, np.float32))


def test_mel_filters_cover_the_band_once():
    filters = mel_filterbank()
    assert filters.shape == (80, 201)
    assert (filters >= 0).all()
    peaks = filters.argmax(axis=1)
    assert (np.diff(peaks) >= 0).all()  # filters rise in frequency


def test_probabilities_are_probabilities(smart_turn):
    rng = np.random.default_rng(0)
    for audio in (np.zeros(16000, np.float32), (rng.standard_normal(48000) * 0.05).astype(np.float32)):
        p = smart_turn.probability_finished(audio)
        assert 0.0 <= p <= 1.0


def test_a_complete_sentence_scores_as_more_finished_than_the_same_sentence_cut(smart_turn, complete_and_cut):
    finished, cut = [], []
    for _sentence, whole, half in complete_and_cut:
        finished.append(smart_turn.probability_finished(whole))
        cut.append(smart_turn.probability_finished(half))
    assert all(f > c for f, c in zip(finished, cut, strict=True)), (finished, cut)
    assert np.mean(finished) - np.mean(cut) > 0.3
    assert all(smart_turn.is_finished(whole) for _, whole, _ in complete_and_cut)


def test_scoring_is_deterministic_and_counted(smart_turn, complete_and_cut):
    _, whole, _ = complete_and_cut[0]
    calls = smart_turn.calls
    assert smart_turn.probability_finished(whole) == smart_turn.probability_finished(whole.copy())
    assert smart_turn.calls == calls + 2 and smart_turn.seconds > 0
