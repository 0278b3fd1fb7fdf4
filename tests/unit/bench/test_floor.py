"""bench realtime --floor: each stage alone on real light models (silero, PocketSphinx, hibari and the
echo LLM), in the breakdown's columns, one after another."""

from __future__ import annotations

import argparse

import pytest

from omnivox.bench import realtime as bench
from omnivox.bench.breakdown import MARKS
from omnivox.bench.floor import measure_floor
from omnivox.voice.stack import ASR_RATE, VoiceStack


@pytest.fixture(scope="module")
def stack() -> VoiceStack:
    from omnivox.voice.asr.pocketsphinx_asr import PocketsphinxAsr
    from omnivox.voice.llm.echo_llm import EchoLlm
    from omnivox.voice.tts.hibari import HibariTts
    from omnivox.voice.vad.silero import SileroVad

    return VoiceStack(vad=SileroVad(ASR_RATE), asr=PocketsphinxAsr(), tts=HibariTts(seed=0), llm=EchoLlm())


def args(mode: str = "server_vad") -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    parsed = parser.parse_args(["--floor", "--silence-ms", "400"])
    parsed.mode = mode
    return parsed


def test_the_floor_passes_every_stage_in_order_after_the_silence_it_waits_for(stack) -> None:
    clips = [bench.speech_clip(bench.SENTENCES[0])]
    floor = measure_floor(stack, clips, bench.RATE, args())
    assert list(floor) == list(MARKS)
    # the turn cannot be decided before the 400 ms of silence have been recorded
    assert floor["decided"] >= 400
    values = [floor[m] for m in MARKS]
    assert values == sorted(values)  # one stage after another, each alone
    assert floor["first_audio_sent"] == floor["tts_first_audio"] == floor["to_caller"]


def test_a_clip_with_no_speech_makes_no_floor(stack) -> None:
    import numpy as np

    assert measure_floor(stack, [(np.zeros(bench.RATE, np.float32), 0.0)], bench.RATE, args()) == {}
