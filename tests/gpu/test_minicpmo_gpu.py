"""MiniCPM-o 4.5 for real: one duplex session of a few units and one turn-based reply, on a GPU.

Runs where a CUDA device is present and ``OMNIVOX_MINICPMO_PATH`` names a local MiniCPM-o 4.5
directory (its weights and model code, with the model's own requirements installed); elsewhere it
is skipped, the one skip the suite allows (the hardware is absent). Optionally
``OMNIVOX_MINICPMO_REF_AUDIO`` names a WAV of the voice to speak with.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from omnivox.audio.resample import resample
from omnivox.engines.base import GenerateParams, GenResult
from omnivox.engines.duplex import DuplexParams
from omnivox.engines.minicpmo import MiniCPMoEngine, UnitPhase
from omnivox.protocol.chat import ChatMessage

MODEL = os.environ.get("OMNIVOX_MINICPMO_PATH")
REF_AUDIO = os.environ.get("OMNIVOX_MINICPMO_REF_AUDIO")


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# the environment variable is checked first, so a machine without the weights never imports torch here
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not MODEL or not _cuda(), reason="needs a CUDA GPU and OMNIVOX_MINICPMO_PATH (MiniCPM-o 4.5 weights)"
    ),
    pytest.mark.timeout(900),
]


@pytest.fixture(scope="module")
def engine() -> Iterator[MiniCPMoEngine]:
    assert MODEL is not None
    loaded = MiniCPMoEngine(MODEL, device="cuda", ref_audio_path=REF_AUDIO)
    loaded.load()
    yield loaded
    loaded.close()


def spoken_question() -> np.ndarray:
    from omnivox.voice.tts.hibari import HibariTts

    tts = HibariTts(seed=0)
    audio = np.concatenate([c.audio for c in tts.synthesize("Hello! What is the capital of France?")])
    return resample(audio, 24000, 16000)


def test_a_duplex_session_listens_then_decides_each_unit(engine: MiniCPMoEngine) -> None:
    import torch

    question = spoken_question()
    units = [question[i : i + 16000] for i in range(0, len(question), 16000)]
    units[-1] = np.pad(units[-1], (0, 16000 - len(units[-1])))
    units += [np.zeros(16000, np.float32)] * 4  # silence: the model's turn to speak
    ready = engine.duplex_prepare(DuplexParams(system_prompt="You are a helpful assistant."))
    assert ready.vision
    results = []
    kv = [engine.kv_length]
    for i, audio in enumerate(units):
        engine.duplex_prefill(audio, [])
        unit = engine.duplex_generate(force_listen=i < 3)
        engine.duplex_finalize()
        results.append(unit)
        kv.append(engine.kv_length)
        if unit.audio is not None:
            assert unit.audio.dtype == np.float32 and unit.audio.ndim == 1
    assert all(u.is_listen for u in results[:3])  # forced
    assert kv == sorted(kv) and kv[-1] > kv[0]  # every unit went into the cache
    allocated = torch.cuda.memory_allocated()
    engine.duplex_cleanup()
    assert engine.phase is UnitPhase.IDLE and engine.kv_length == 0
    assert torch.cuda.memory_allocated() <= allocated


def test_a_turn_based_reply_comes_from_the_model_cache(engine: MiniCPMoEngine) -> None:
    stats = engine.prefill([ChatMessage(role="user", content="Say one short sentence about the sea.")])
    assert stats.input_tokens > 0 and stats.cached_tokens == 0
    result = GenResult()
    chunks = list(engine.generate(GenerateParams(max_new_tokens=48), threading.Event(), result))
    assert chunks and result.text.strip()
    again = engine.prefill([ChatMessage(role="user", content="And another.")])
    assert again.cached_tokens >= stats.prompt_length  # the first turn was reused
