"""Speech over a duplex reply follows the realtime rules: its own echo, a cough and "mm hmm" do not cut
it (a cough pauses it, then it resumes where it paused); a real sentence does.

The voice agent deciding units over the cascade's voice models, with Whisper (it hears no words in a
cough) and the echo LLM ("You said: ...", so the whole reply is known). The client plays each
unit's audio while it records the next chunk, through a speakerphone where a test needs the echo.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from omnivox.audio.resample import resample
from omnivox.core.config import Settings
from omnivox.engines.duplex import DuplexParams
from omnivox.engines.registry import build_engine
from omnivox.worker.duplex.agent_units import AgentUnits
from omnivox.worker.duplex.inputs import Chunk
from voices import MISSING, espeak_available, espeak_ng

STORY = "tell me a long story about a brave little fox who lived in the forest by the river"
UNIT = 16000  # one second of microphone audio per unit


@pytest.fixture(scope="module")
def engine():
    e = build_engine(Settings(engine="cascade", llm="echo", asr="whisper"))
    e.load()
    yield e
    e.close()


@pytest.fixture(scope="module")
def espeak():
    if not espeak_available():
        pytest.fail(MISSING, pytrace=False)
    return espeak_ng


@pytest.fixture(scope="module")
def story(engine) -> np.ndarray:
    audio = np.concatenate([c.audio for c in engine.voice.tts.synthesize(STORY)])
    return resample(audio, 24000, 16000)


class Call:
    """A duplex call faster than real time: the user's voice, the speaker's echo, the units."""

    def __init__(self, source: AgentUnits, echo_db: float | None = None) -> None:
        self.source = source
        self.gain = 10 ** (echo_db / 20) if echo_db is not None else 0.0
        self.voice = np.zeros(0, np.float32)  # what the user says, from stream sample 0
        self.speaker = np.zeros(0, np.float32)  # what the speaker plays, from stream sample 0
        self.units: list = []

    async def start(self) -> Call:
        await self.source.prepare(DuplexParams())
        return self

    def say(self, audio: np.ndarray, at_unit: int) -> None:
        end = at_unit * UNIT + len(audio)
        self.voice = np.concatenate([self.voice, np.zeros(max(0, end - len(self.voice)), np.float32)])
        self.voice[at_unit * UNIT : end] += audio

    async def run(self, n: int) -> None:
        for _ in range(n):
            i = len(self.units)
            chunk = _window(self.voice, i * UNIT) + self.gain * _window(
                self.speaker, i * UNIT - 1280
            )  # 80 ms
            await asyncio.sleep(0.05)
            self.source.hear(Chunk(chunk))
            # hearing keeps up, as it does in real time (at ten times real time on a busy machine,
            # what the user said would be heard units late)
            assert await self.source.caught_up()
            unit = await self.source.decide(False)
            self.units.append(unit)
            if not unit.is_listen:  # it plays from the next chunk on, after what is still playing
                start = max(len(self.speaker), (i + 1) * UNIT)
                pad = np.zeros(start - len(self.speaker), np.float32)
                self.speaker = np.concatenate([self.speaker, pad, resample(unit.audio, 24000, 16000)])

    async def until_speaking(self, limit: int = 20) -> int:
        while not any(not u.is_listen for u in self.units) and len(self.units) < limit:
            await self.run(1)
        return len(self.units)

    async def until_quiet(self, limit: int = 40) -> None:
        while len(self.units) < limit and not (self.units[-1].is_listen and self.said_all()):
            await self.run(1)
        await self.run(2)

    def said(self) -> str:
        return "".join(u.text for u in self.units if not u.is_listen)

    def said_all(self) -> bool:
        return any(u.end_of_turn for u in self.units)

    def spoken_runs(self) -> list[tuple[int, int]]:
        """[first, end) unit indices of each run of speaking units."""
        runs: list[tuple[int, int]] = []
        for i, u in enumerate(self.units):
            if not u.is_listen:
                if runs and runs[-1][1] == i:
                    runs[-1] = (runs[-1][0], i + 1)
                else:
                    runs.append((i, i + 1))
        return runs


def _window(stream: np.ndarray, start: int) -> np.ndarray:
    out = np.zeros(UNIT, np.float32)
    lo, hi = max(start, 0), min(start + UNIT, len(stream))
    if hi > lo:
        out[lo - start : hi - start] = stream[lo:hi]
    return out


def whole_story(said: str) -> bool:
    return said.startswith("You said:") and said.count("You said") == 1 and "river" in said.lower()


async def test_its_own_echo_through_a_speakerphone_never_pauses_or_cuts_the_reply(source, story) -> None:
    call = await Call(source, echo_db=-10.0).start()
    call.say(story, 0)
    await call.until_speaking()
    await call.until_quiet()
    resumed = source.resumed
    assert resumed == []  # the gate kept the echo from the VAD: nothing paused the reply
    assert whole_story(call.said())
    assert len(call.spoken_runs()) == 1  # said in one go
    assert (
        sum(u.end_of_turn for u in call.units) == 1 and call.units[call.spoken_runs()[0][1] - 1].end_of_turn
    )


async def test_a_cough_pauses_the_reply_then_it_resumes_and_is_said_whole(source, story, espeak) -> None:
    call = await Call(source).start()
    call.say(story, 0)
    first = await call.until_speaking()
    # two seconds in: the echo gate has learnt in the first that no echo comes back (before that,
    # "mm hmm" as loud as the reply is taken for its echo)
    call.say(espeak("[[h@@]]"), first + 2)  # a breathy cough: voiced, no words
    await call.until_quiet()
    resumed = source.resumed
    assert resumed == ["no_words"]  # it paused the reply, which went on from where it stopped
    assert whole_story(call.said())  # (within the unit: the client heard no gap)
    assert (
        sum(u.end_of_turn for u in call.units) == 1 and call.units[call.spoken_runs()[-1][1] - 1].end_of_turn
    )


async def test_mm_hmm_over_the_reply_does_not_cut_it_or_make_a_turn(source, story, espeak) -> None:
    call = await Call(source).start()
    call.say(story, 0)
    first = await call.until_speaking()
    call.say(espeak("mm hmm"), first + 2)  # after the gate has learnt, as above
    await call.until_quiet()
    resumed = source.resumed
    # paused once, then resumed: heard as a backchannel, or (where Whisper's words for espeak-ng's
    # "mm hmm" come out unsure: it varies from one CPU to another) as no speech or unclear words
    assert len(resumed) == 1 and resumed[0] in ("backchannel", "no_speech", "unclear", "sounds_backchannel")
    assert whole_story(call.said())  # one reply, whole: "mm hmm" asked for none
    assert sum(u.end_of_turn for u in call.units) == 1


async def test_a_real_sentence_over_the_reply_cuts_it_and_is_answered(source, story, espeak) -> None:
    call = await Call(source, echo_db=-10.0).start()
    call.say(story, 0)
    first = await call.until_speaking()
    call.say(espeak("wait, stop. what about the weather tomorrow?"), first + 1)
    await call.run(12)
    cut = next(i for i, u in enumerate(call.units) if u.is_listen and u.end_of_turn)
    before = [u for u in call.units[:cut] if not u.is_listen]
    assert before and "".join(u.text for u in before).startswith("You said:")
    assert not any(u.end_of_turn for u in before)  # cut before its end (a finished reply ends speaking)
    answer = "".join(u.text for u in call.units[cut:] if not u.is_listen)
    assert "tomorrow" in answer.lower()  # the sentence over it was the next turn
