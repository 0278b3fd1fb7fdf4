"""Silero's step on digital silence without the model call: the model's scores and states."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.voice.vad.silent import SilentStep
from omnivox.voice.vad.silero import SileroModel, model_path


@pytest.fixture(scope="module")
def steps() -> dict[int, SilentStep]:
    loaded = SilentStep.load(model_path())
    assert loaded is not None and set(loaded) == {8000, 16000}
    return loaded


@pytest.mark.parametrize(("rate", "width"), [(16000, 576), (8000, 288)])
def test_a_silent_window_scores_as_the_model_from_any_state(steps, weather_16k, rate, width) -> None:
    model = SileroModel()
    audio = weather_16k if rate == 16000 else weather_16k[::2].copy()
    window = width * 8 // 9  # the context is an eighth of the window
    state = np.zeros((2, 1, 128), np.float32)
    states = []
    for i in range(0, len(audio) - width, window):  # the states a stream goes through in speech
        _, state = model.run(audio[i : i + width][np.newaxis], state, rate)
        states.append(state)
    batch = np.concatenate(states, axis=1)  # several streams at once, each its own row
    probs, after = model.run(np.zeros((batch.shape[1], width), np.float32), batch, rate)
    ours, ours_after = steps[rate].step(batch)
    assert ours.shape == probs.shape and ours_after.shape == after.shape
    assert np.abs(ours - probs).max() < 3e-5  # (measured 1.1e-5 on a score near 1)
    assert np.abs(ours_after - after).max() < 1e-4 * max(1.0, np.abs(after).max())


def test_a_long_silence_stays_with_the_model(steps) -> None:
    model = SileroModel()
    state = ours = np.zeros((2, 1, 128), np.float32)
    zeros = np.zeros((1, 576), np.float32)
    for _ in range(300):  # ~10 s
        p, state = model.run(zeros, state, 16000)
        q, ours = steps[16000].step(ours)
        assert abs(float(p[0]) - float(q[0])) < 1e-5
    assert np.abs(state - ours).max() < 1e-3


def test_another_file_gives_no_steps(tmp_path) -> None:
    path = tmp_path / "not_silero.onnx"
    path.write_bytes(b"\x08\x07\x12\x04test")  # a ModelProto with no graph
    assert SilentStep.load(str(path)) is None
    assert SilentStep.load(str(tmp_path / "missing.onnx")) is None
