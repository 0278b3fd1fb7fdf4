"""Duplex over the cascade's voice models (the voice agent deciding units) with the embedded models
(echo LLM): units that listen, a reply spoken in unit-sized pieces, barge-in, the settle wait,
frames, prepare and cleanup."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from omnivox.agent.events import ReplyReport
from omnivox.agent.interruption import Line
from omnivox.audio.resample import resample
from omnivox.core.config import Settings
from omnivox.core.errors import PrepareRequired
from omnivox.engines.duplex import DuplexParams
from omnivox.engines.registry import build_engine
from omnivox.voice.asr.base import word_error_rate
from omnivox.worker.duplex.agent_units import AgentUnits
from omnivox.worker.duplex.inputs import Chunk
from omnivox.worker.reply_metrics import reply_metrics

WEATHER = "what is the weather like in paris today"
SILENCE = np.zeros(16000, np.float32)


@pytest.fixture(scope="module")
def engine():
    e = build_engine(Settings(engine="cascade", llm="echo", asr="pocketsphinx"))
    e.load()
    yield e
    e.close()


@pytest.fixture(scope="module")
def weather(engine) -> np.ndarray:
    audio = np.concatenate([c.audio for c in engine.voice.tts.synthesize(WEATHER)])
    return resample(audio, 24000, 16000)


def seconds(audio: np.ndarray) -> list[np.ndarray]:
    n = -(-len(audio) // 16000) * 16000
    padded = np.zeros(n, np.float32)
    padded[: len(audio)] = audio
    return [padded[i : i + 16000] for i in range(0, n, 16000)]


async def units(source: AgentUnits, chunks: list[np.ndarray], force_first: int = 0) -> list:
    """Units at ten times real time (a client sends a chunk per second of audio; hearing runs on its
    own thread and needs some of that time)."""
    out = []
    for i, chunk in enumerate(chunks):
        await asyncio.sleep(0.1)
        costs = await source.step(Chunk(chunk), i < force_first, finalize=False)
        out.append(costs.unit)
    return out


async def test_units_before_prepare_are_refused(source) -> None:
    await source.cleanup()
    with pytest.raises(PrepareRequired):
        await source.step(Chunk(SILENCE), False, finalize=False)


async def test_a_duplex_session_is_on_a_wideband_line_and_its_judge_weighs_the_witness(source) -> None:
    # no phone adapter builds duplex sessions: a client's microphone, the backchannel witness weighed
    await source.prepare(DuplexParams())
    assert source.agent is not None
    policy = source.agent.settings.interruption
    assert policy.line is Line.WIDEBAND and policy.weighs_witness


async def test_the_user_is_heard_then_answered_in_unit_sized_pieces(source, weather) -> None:
    ready = await source.prepare(DuplexParams(system_prompt="be brief"))
    assert ready.vision is False and ready.notes == ()
    heard = await units(source, [*seconds(weather), *[SILENCE] * 8], force_first=3)
    spoken = [u for u in heard if not u.is_listen]
    assert spoken, "never answered"
    said = "".join(u.text for u in spoken)  # text deltas: their concatenation is the reply
    assert (
        said.startswith("You said:")
        and "  " not in said
        and word_error_rate(WEATHER, said.split(":", 1)[1]) <= 0.2
    )
    assert all(u.audio is not None and len(u.audio) <= 24000 for u in spoken)  # one unit at most
    assert sum(u.end_of_turn for u in heard) == 1 and spoken[-1].end_of_turn
    # the reply starts in the unit that heard the turn end (the settle wait), not a unit later
    first = heard.index(spoken[0])
    assert first <= len(seconds(weather)) + 1


async def test_a_heard_reply_reports_its_figures_and_breakdown_for_the_gateway(source, weather) -> None:
    reports: list[ReplyReport] = []
    source.figures = reports.append
    await source.prepare(DuplexParams())
    heard = await units(source, [*seconds(weather), *[SILENCE] * 8], force_first=3)
    assert any(not u.is_listen for u in heard), "never answered"
    for _ in range(10):  # the report follows the reply's last unit once its thread has ended
        if reports:
            break
        heard += await units(source, [SILENCE])
    assert len(reports) == 1
    metrics = reply_metrics(reports[0])
    assert metrics.response_done and not metrics.interrupted and metrics.error_code is None
    assert metrics.voice_to_voice_s is not None and metrics.voice_to_voice_s > 0
    assert metrics.stages_s is not None and {"decided", "first_audio_sent"} <= set(metrics.stages_s)


async def test_speech_over_the_reply_cuts_it_at_the_next_unit(source, weather, engine) -> None:
    await source.prepare(DuplexParams())
    chunks = seconds(weather)
    heard = await units(source, [*chunks, SILENCE])
    while heard[-1].is_listen and len(heard) < 20:  # until it speaks
        heard += await units(source, [SILENCE])
    assert not heard[-1].is_listen
    # the user talks over it, in words of their own: the echo LLM's reply repeats the first words,
    # and the user saying those again while they play is judged its own echo (and played on)
    audio = np.concatenate([c.audio for c in engine.voice.tts.synthesize("no stop please stop")])
    cut = await units(source, [*seconds(resample(audio, 24000, 16000)), SILENCE, SILENCE])
    assert any(u.is_listen and u.end_of_turn for u in cut)


async def test_omni_frames_are_ignored_without_a_vision_llm_and_it_says_so(source) -> None:
    ready = await source.prepare(DuplexParams(mode="omni"))
    assert ready.vision is False and "ignored" in ready.notes[0]
    unit = (await source.step(Chunk(SILENCE, [np.zeros((8, 8, 3), np.uint8)]), False, finalize=False)).unit
    assert unit.is_listen
    await source.cleanup()
    await source.cleanup()  # twice is fine
