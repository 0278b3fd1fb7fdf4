"""The voice agent with fake voice models (a scripted listener, scripted replies) and a fake clock:
commands in, its typed events out, in order, for every turn-taking and barge-in rule."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import numpy as np
import pytest

from fake_voice_engine import FakeVoiceEngine
from omnivox.agent.breakdown import steps
from omnivox.agent.events import (
    Failure,
    IdleTimeout,
    InputCleared,
    ReplyAudio,
    ReplyCut,
    ReplyEnded,
    ReplyPaused,
    ReplyReport,
    ReplyResumed,
    ReplyStarted,
    ReplyState,
    SpeechStarted,
    SpeechStopped,
    TranscriptDelta,
    UserTurn,
)
from omnivox.agent.interruption import InterruptionPolicy, Line
from omnivox.agent.loop import AgentSettings, VoiceAgent
from omnivox.agent.pacing import LeadPacing
from omnivox.agent.reply import ReplyPlan
from omnivox.agent.turns import TurnSettings
from omnivox.connection.units import WorkUnits
from omnivox.core.errors import EngineFailure
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.asr.base import Hypothesis, StreamingAsr
from omnivox.voice.listener import Heard, Listener
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.reply import ReplyRequest
from omnivox.voice.vad.base import VoiceActivityDetector
from omnivox.voice.vad.turn import TurnParams

S = ReplyState
CHUNK = np.zeros(1600, np.float32)  # 100 ms at 16 kHz


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Harness:
    """The agent, its fake models, and an adapter that keeps the conversation and every event."""

    def __init__(
        self,
        script: list[list[Heard]],
        hold: bool = False,
        settings: AgentSettings | None = None,
        listener: Listener | None = None,  # a real listener instead of the scripted one
    ):
        self.engine = FakeVoiceEngine(script, hold=hold)
        if listener is not None:
            self.engine.listener = listener  # type: ignore[assignment]
        self.clock = Clock()
        self.events: list = []
        self.history: list[ChatMessage] = []
        self.planned: list[list[str]] = []  # the extra words each plan was asked with
        self.failures: list[BaseException] = []
        self.units = WorkUnits(lambda name, exc: self.failures.append(exc))
        self.agent = VoiceAgent(
            self.engine,
            emit=self.emit,
            plan=self.plan,
            units=self.units,
            pacing=LeadPacing(lead_ms=1e9),
            settings=settings or AgentSettings(),
            clock=self.clock,
            prompt=self.prompt,
        )

    def emit(self, event: object) -> None:
        self.events.append(event)
        if isinstance(event, UserTurn):
            self.history.append(ChatMessage(role="user", content=event.text))

    def plan(self, extra: list[ChatMessage]) -> ReplyPlan:
        self.planned.append([m.text() for m in extra])
        request = ReplyRequest(self.history + extra, LlmParams(max_tokens=20), speak=True, voice="v1")
        return ReplyPlan(request)

    def prompt(self, extra: list[ChatMessage]) -> ReplyRequest:
        return ReplyRequest(self.history + extra, LlmParams(max_tokens=20))

    def feed(self, n: int = 1) -> None:
        for _ in range(n):
            self.clock.now += 0.1
            self.agent.feed(CHUNK, self.clock.now)

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]

    def kinds(self) -> list[str]:
        return [type(e).__name__ for e in self.events]

    async def until(self, kind: type, n: int = 1) -> object:
        for _ in range(600):
            if len(self.of(kind)) >= n:
                return self.of(kind)[n - 1]
            await asyncio.sleep(0.005)
        raise AssertionError(f"no {n} {kind.__name__} in {self.kinds()}")


@pytest.fixture
async def harness(request) -> AsyncIterator[Harness]:
    script, hold, *rest = getattr(request, "param", ([], False))
    h = Harness(script, hold, rest[0] if rest else None)
    running = asyncio.create_task(h.agent.run())
    yield h
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    await h.agent.close()
    await h.units.close()
    assert h.failures == []


TURN = [
    [Heard("speech_started", 100.0)],
    [Heard("speech_confirmed", 250.0), Heard("partial", 300.0, "what")],
    [Heard("partial", 400.0, "what time")],
    [Heard("speech_stopped", 900.0), Heard("final", 1400.0, "what time is it")],
]


@pytest.mark.parametrize("harness", [(TURN, False)], indirect=True)
async def test_a_spoken_turn_is_heard_committed_and_answered(harness) -> None:
    harness.feed(4)
    report = await harness.until(ReplyReport)
    kinds = harness.kinds()
    assert kinds[:5] == ["SpeechStarted", "TranscriptDelta", "SpeechStopped", "UserTurn", "ReplyStarted"]
    assert kinds.index("ReplyEnded") < kinds.index("ReplyReport")
    started, stopped = harness.of(SpeechStarted)[0], harness.of(SpeechStopped)[0]
    assert started.turn_id == stopped.turn_id == harness.of(UserTurn)[0].turn_id
    assert (started.audio_ms, stopped.audio_ms) == (100.0, 900.0)
    assert harness.of(TranscriptDelta)[0].text == "what"  # the word two partials agree on
    assert harness.of(UserTurn)[0].text == "what time is it"
    assert harness.planned == [[]] and harness.engine.asked == ["what time is it"]
    end = harness.of(ReplyEnded)[0]
    assert end.state is S.DONE and end.heard == "Reply to: what time is it. And more."
    # speech ended at the last chunk's arrival less the 500 ms of audio after it; first audio now
    assert report.figures.voice_to_voice_s == pytest.approx(0.5)
    assert report.asr_audio_s == pytest.approx(0.4)  # the hearing's figures ride along


@pytest.mark.parametrize("harness", [(TURN, False)], indirect=True)
async def test_the_next_turns_opening_is_computed_as_soon_as_a_reply_ends(harness) -> None:
    harness.feed(4)
    await harness.until(ReplyReport)
    engine = harness.engine
    for _ in range(600):  # the prefill runs on the output thread
        if engine.kv[-1] == ("user", ""):
            break
        await asyncio.sleep(0.005)
    # the reply left its words in the LLM's state; after it, the conversation as the next turn
    # renders it (the reply as the adapter keeps it) and that turn's opening, computed while the reply
    # plays rather than when the user speaks again
    assert engine.kv == [("user", "what time is it"), ("user", "")]
    assert engine.prefilled[-1] == "" and engine.asked == ["what time is it"]


OVER_THE_REPLY = [*TURN, [], [Heard("speech_started", 2000.0)], [Heard("speech_confirmed", 2150.0)]]


@pytest.mark.parametrize(
    "harness", [([*OVER_THE_REPLY, [Heard("partial", 2400.0, "wait a moment")]], True)], indirect=True
)
async def test_barge_in_pauses_the_reply_then_words_cut_it_where_it_paused(harness) -> None:
    harness.feed(5)
    await harness.until(ReplyAudio)
    harness.feed(3)  # (its 100 ms have played by the time the speech holds)
    end = await harness.until(ReplyEnded)
    paused = harness.of(ReplyPaused)[0]
    assert end.state is S.CANCELLED and end.figures.reason == "turn_detected"
    assert end.stopped_ms == paused.at_ms == pytest.approx(100)
    assert not harness.of(ReplyResumed)
    await asyncio.to_thread(harness.engine.stopped.wait, 2)  # the models were told to stop


@pytest.mark.parametrize(
    "harness",
    [
        (
            [
                *OVER_THE_REPLY,
                [Heard("pause", 2400.0, "")],
                [Heard("speech_stopped", 2300.0)],
                [Heard("final", 2800.0, "")],
            ],
            True,
        )
    ],
    indirect=True,
)
async def test_a_false_interruption_resumes_the_reply_and_makes_no_turn(harness) -> None:
    harness.feed(5)
    await harness.until(ReplyAudio)
    harness.feed(5)
    resumed = await harness.until(ReplyResumed)
    assert resumed.reason == "no_words" and resumed.at_ms == harness.of(ReplyPaused)[0].at_ms
    await harness.until(InputCleared)  # the noise was no turn
    assert len(harness.of(UserTurn)) == 1 and not harness.of(ReplyEnded)  # the reply plays on


@pytest.mark.parametrize(
    "harness",
    [
        (
            [
                *OVER_THE_REPLY,
                [Heard("pause", 2500.0, "Mm-hmm.")],
                [Heard("speech_stopped", 2400.0), Heard("final", 2900.0, "Mm-hmm.")],
            ],
            True,
        )
    ],
    indirect=True,
)
async def test_a_backchannel_resumes_the_reply_and_is_kept_without_a_reply(harness) -> None:
    harness.feed(5)
    await harness.until(ReplyAudio)
    harness.feed(4)
    assert (await harness.until(ReplyResumed)).reason == "backchannel"
    turn = await harness.until(UserTurn, 2)
    assert turn.text == "Mm-hmm."  # the transcript keeps it
    await asyncio.sleep(0.05)
    assert len(harness.of(ReplyStarted)) == 1 and harness.planned == [[]]  # it asked for nothing


@pytest.mark.parametrize(
    "harness",
    [
        (
            [
                *OVER_THE_REPLY,
                [Heard("pause", 2600.0, "reply to what time")],
                [Heard("speech_stopped", 2500.0), Heard("final", 3000.0, "reply to what time")],
            ],
            True,
        )
    ],
    indirect=True,
)
async def test_its_own_words_heard_back_resume_the_reply_and_make_no_turn(harness) -> None:
    harness.feed(5)
    await harness.until(ReplyAudio)
    harness.feed(4)
    assert (await harness.until(ReplyResumed)).reason == "echo"
    await harness.until(InputCleared)
    assert len(harness.of(UserTurn)) == 1  # its own voice is not the user's turn


PAUSE = [
    [Heard("speech_started", 100.0)],
    [Heard("pause", 800.0, "call my")],  # a reply is prepared, held
    [Heard("resumed", 900.0)],  # the user goes on: it is dropped unheard
    [Heard("speech_stopped", 1500.0), Heard("final", 2000.0, "call my sister")],
]


@pytest.mark.parametrize("harness", [(PAUSE, False)], indirect=True)
async def test_a_pause_that_is_not_the_end_of_the_turn_discards_the_prepared_reply(harness) -> None:
    harness.history.append(ChatMessage(role="assistant", content="hello"))
    harness.feed(3)
    await harness.until(ReplyEnded)
    engine = harness.engine
    for _ in range(600):  # the prefills run on the output thread after the prepared reply
        if len(engine.prefilled) == 2:
            break
        await asyncio.sleep(0.005)
    # the turn's opening was computed as speech started; the prepared reply wrote its words into the
    # LLM's state, and when the user went on that state went back to the conversation and their words
    assert engine.prefilled == ["", "call my"]
    assert engine.kv == [("assistant", "hello"), ("user", "call my")]
    harness.feed(1)
    await harness.until(ReplyEnded, 2)
    discarded, said = harness.of(ReplyEnded)
    assert discarded.state is S.DISCARDED and said.state is S.DONE
    assert harness.planned == [["call my"], []]  # prepared with the words so far, then asked again
    assert engine.asked == ["call my", "call my sister"]
    assert len(harness.of(ReplyStarted)) == 1  # the prepared one never said a word
    assert {a.reply_id for a in harness.of(ReplyAudio)} == {said.reply_id}  # nor sent a sample


REVISED = [
    [Heard("speech_started", 100.0)],
    [Heard("pause", 800.0, "call my sister")],  # a reply is prepared, held
    [Heard("speech_stopped", 1200.0), Heard("final", 1500.0, "call my sister, Anne")],  # other words
]


@pytest.mark.parametrize("harness", [(REVISED, False)], indirect=True)
async def test_a_prepared_reply_to_other_words_is_discarded_unheard_and_the_turn_answered_again(
    harness,
) -> None:
    harness.feed(3)
    await harness.until(ReplyEnded, 2)
    discarded, said = harness.of(ReplyEnded)
    assert (discarded.state, said.state) == (S.DISCARDED, S.DONE)
    assert harness.engine.asked == ["call my sister", "call my sister, Anne"]
    assert [e.reply_id for e in harness.of(ReplyStarted)] == [said.reply_id]
    assert {a.reply_id for a in harness.of(ReplyAudio)} == {said.reply_id}
    assert said.heard == "Reply to: call my sister, Anne. And more."


SAME_WORDS = [
    [Heard("speech_started", 100.0), Heard("partial", 300.0, "good morning to")],
    [Heard("pause", 800.0, "good morning to you")],
    [Heard("speech_stopped", 1200.0), Heard("final", 1500.0, "Good morning to you!")],
]


@pytest.mark.parametrize("harness", [(SAME_WORDS, False)], indirect=True)
async def test_a_prepared_reply_is_released_when_the_final_transcript_says_the_same_words(harness) -> None:
    harness.feed(1)
    # the settled words are prefilled on the output thread; a reply prepared before that thread got
    # to them makes them moot (by design), so the pause comes once they are computed
    for _ in range(600):
        if len(harness.engine.prefilled) == 2:
            break
        await asyncio.sleep(0.005)
    harness.feed(2)
    report = await harness.until(ReplyReport)
    assert harness.engine.asked == ["good morning to you"]  # prepared once, released, never asked again
    # the opening, then the settled words (then, once the reply has ended, the next turn's opening)
    assert harness.engine.prefilled[:2] == ["", "good morning"]
    assert [e.state for e in harness.of(ReplyEnded)] == [S.DONE]
    # its voice-to-voice counts from the speech's end (300 ms of audio before the last chunk), not
    # from when it was prepared
    assert report.figures.voice_to_voice_s == pytest.approx(0.3)


PREPARED = [
    [Heard("speech_started", 100.0)],
    [Heard("pause", 800.0, "good morning")],
    [Heard("speech_stopped", 1200.0), Heard("final", 1500.0, "good morning")],
]


@pytest.mark.parametrize("harness", [(PREPARED, False)], indirect=True)
async def test_a_reply_prepared_in_the_pause_is_the_one_said(harness) -> None:
    harness.feed(3)
    end = await harness.until(ReplyEnded)
    assert end.state is S.DONE and harness.planned == [["good morning"]]
    assert harness.engine.asked == ["good morning"]  # prepared once, released, never asked again
    assert harness.kinds().index("UserTurn") < harness.kinds().index("ReplyStarted")


TWO_TURNS_AT_ONCE = [
    [Heard("speech_started", 100.0)],
    [Heard("speech_stopped", 900.0), Heard("final", 1000.0, "first question")],
    [],
    [Heard("speech_started", 1300.0)],
    [Heard("speech_stopped", 1900.0), Heard("final", 2000.0, "second question")],
    *[[]] * 5,
]


@pytest.mark.parametrize("harness", [(TWO_TURNS_AT_ONCE, False)], indirect=True)
async def test_a_burst_of_held_audio_is_answered_once_when_it_has_all_been_heard(harness) -> None:
    harness.feed(10)  # a second of speech at once, faster than real time
    await harness.until(ReplyEnded)
    assert [t.text for t in harness.of(UserTurn)] == ["first question", "second question"]
    assert len(harness.of(ReplyStarted)) == 1 and harness.engine.asked == ["second question"]
    assert [m.text() for m in harness.history] == ["first question", "second question"]


@pytest.mark.parametrize("harness", [([], True)], indirect=True)
async def test_a_client_truncation_mid_reply_stops_it_where_the_client_heard_it(harness) -> None:
    harness.history.append(ChatMessage(role="user", content="go on"))
    reply = await harness.agent.respond(lambda: harness.plan([]))
    await harness.until(ReplyAudio)
    assert harness.agent.truncate(reply.playback, 60.0)  # still being said: it stops there
    end = await harness.until(ReplyEnded)
    assert (end.state, end.stopped_ms, end.figures.reason) == (S.CANCELLED, 60.0, "client_cancelled")
    assert end.heard == "Reply to: go"  # the first 60 of its 100 ms of "Reply to: go on."
    await harness.until(ReplyReport)
    assert not harness.agent.truncate(reply.playback, 10.0)  # over: the adapter keeps what was heard


@pytest.mark.parametrize("harness", [([], False)], indirect=True)
async def test_a_failed_reply_is_reported_and_the_agent_goes_on(harness) -> None:
    harness.engine.fail = EngineFailure("the LLM server is unreachable")
    await harness.agent.respond(lambda: harness.plan([]))
    report = await harness.until(ReplyReport)
    assert report.state is S.FAILED and report.figures.error is not None
    harness.engine.fail = None
    await harness.agent.respond(lambda: harness.plan([]))
    assert (await harness.until(ReplyReport, 2)).state is S.DONE


@pytest.mark.parametrize("harness", [([], False, AgentSettings(turns=None))], indirect=True)
async def test_manual_turns_commit_by_hand_and_refuse_too_little_audio(harness) -> None:
    harness.agent.commit("evt_1")  # nothing heard yet
    failure = await harness.until(Failure)
    assert failure.tag == "evt_1" and failure.error.code == "input_audio_buffer_commit_empty"
    harness.feed(2)
    harness.agent.commit("evt_2")
    assert (await harness.until(UserTurn)).text == "typed by hand"
    assert harness.engine.listener.configured == []  # opened for manual turns from the start
    await asyncio.sleep(0.05)
    assert not harness.of(ReplyStarted)  # a turn committed by hand is answered only when asked


async def test_the_hearing_computes_the_backchannel_witness_only_while_the_judge_weighs_it(harness) -> None:
    listener = harness.engine.listener
    assert listener.witness  # a wideband session's judge (the default) weighs it: computed

    async def judged_on(policy: InterruptionPolicy) -> None:
        await harness.agent.configure(replace(harness.agent.settings, interruption=policy))
        harness.feed()  # (settings take effect in audio order, on the input thread)
        for _ in range(600):
            if listener.witness is policy.weighs_witness:
                break
            await asyncio.sleep(0.005)

    # a phone line's judge never weighs it: no second recogniser pass
    await judged_on(InterruptionPolicy(line=Line.PHONE))
    assert not listener.witness and listener.configured[-1] == harness.agent.settings.turns.params
    await judged_on(InterruptionPolicy(line=Line.WIDEBAND))
    assert listener.witness


@pytest.mark.parametrize(
    "harness", [([], False, AgentSettings(interruption=InterruptionPolicy(line=Line.PHONE)))], indirect=True
)
async def test_a_phone_lines_hearing_never_computes_the_witness(harness) -> None:
    assert not harness.engine.listener.witness  # set before the input thread hears anything


@pytest.mark.parametrize(
    "harness", [([], False, AgentSettings(turns=TurnSettings(idle_timeout_ms=50)))], indirect=True
)
async def test_silence_after_a_reply_prompts_the_user(harness) -> None:
    await harness.agent.respond(lambda: harness.plan([]))
    idle = await harness.until(IdleTimeout)
    assert idle.audio_end_ms >= idle.audio_start_ms
    await harness.until(ReplyStarted, 2)
    assert harness.planned[-1] == ["..."]  # the user "said" nothing


@pytest.mark.parametrize("harness", [([], True)], indirect=True)
async def test_stop_speaking_cuts_the_reply_and_names_it(harness) -> None:
    reply = await harness.agent.respond(lambda: harness.plan([]))
    await harness.until(ReplyAudio)
    assert harness.agent.stop_speaking() == reply.reply_id
    assert (await harness.until(ReplyEnded)).state is S.CANCELLED
    await harness.until(ReplyReport)
    assert harness.agent.stop_speaking() is None or harness.of(ReplyEnded)  # nothing left to stop


TIMED_TURN = [
    *TURN[:3],
    # heard on the fake clock: the chunk that ended the turn arrived at 100.4
    [Heard("speech_stopped", 900.0, at=100.4), Heard("final", 1400.0, "what time is it", at=100.42)],
]


@pytest.mark.parametrize("harness", [(TIMED_TURN, False)], indirect=True)
async def test_the_report_of_a_spoken_turn_breaks_its_voice_to_voice_down(harness) -> None:
    harness.feed(4)
    report = await harness.until(ReplyReport)
    marks = report.figures.times.marks()  # speech ended at 99.9 (500 ms of audio before the chunk)
    assert marks["noticed"] == marks["decided"] == pytest.approx(0.5)  # one chunk held pause and end
    assert marks["transcribed"] == pytest.approx(0.52)
    assert marks["first_audio_sent"] == pytest.approx(report.figures.voice_to_voice_s)
    assert sum(steps(marks).values()) == pytest.approx(report.figures.voice_to_voice_s)


# ---- the listener's reports of its player: a reply plays (and speech over it may be a barge-in)
# while the listener's player plays it, and no longer

NEXT_QUESTION = [
    [Heard("speech_started", 2000.0)],
    [Heard("speech_confirmed", 2150.0)],
    [Heard("speech_stopped", 2600.0), Heard("final", 3100.0, "and tomorrow")],
]


async def answered_then(harness: Harness) -> str:
    """The first turn answered and its reply over (sent, not necessarily played); returns its id."""
    harness.feed(4)
    await harness.until(ReplyReport)
    return harness.of(ReplyStarted)[0].reply_id


def feed_now(harness: Harness, n: int) -> None:
    """Chunks that arrive at once (the clock stands: the reply's 100 ms are still playing, as modelled)."""
    for _ in range(n):
        harness.agent.feed(CHUNK, harness.clock.now)


@pytest.mark.parametrize("harness", [([*TURN, *NEXT_QUESTION], False)], indirect=True)
@pytest.mark.parametrize("reported", [True, False])
async def test_words_after_the_listener_finished_playing_the_reply_are_a_new_turn(harness, reported) -> None:
    rid = await answered_then(harness)
    if reported:  # the player played it all already (it played from the first sample it got)
        harness.agent.played(rid, True, harness.clock.now)
        harness.agent.played(rid, False, harness.clock.now)
    feed_now(harness, 2)
    await harness.agent.caught_up(2.0)
    if not reported:  # the model alone: the reply still has 100 ms to play, so it is spoken over
        assert harness.of(ReplyPaused)
        return
    assert not harness.of(ReplyPaused)
    harness.feed(1)
    assert (await harness.until(UserTurn, 2)).text == "and tomorrow"
    await harness.until(ReplyStarted, 2)  # answered as a turn of its own, nothing was cut
    assert [e.state for e in harness.of(ReplyEnded)][:1] == [S.DONE]


@pytest.mark.parametrize("harness", [([*TURN, *NEXT_QUESTION], False)], indirect=True)
async def test_words_while_the_listener_still_plays_the_reply_are_speech_over_it(harness) -> None:
    rid = await answered_then(harness)
    harness.agent.played(rid, True, harness.clock.now + 1.0)  # a carrier's buffer: it began 1 s late
    harness.clock.now += 0.5  # the model's end (100 ms) is past, the caller is still hearing it
    harness.agent.played("resp_other", False, harness.clock.now)  # (another reply's report: ignored)
    feed_now(harness, 2)
    await harness.agent.caught_up(2.0)
    assert harness.of(ReplyPaused)[0].reply_id == rid  # paused while the judge hears the words


BARGE_IN_AT_THE_END = [
    [Heard("speech_started", 1700.0)],  # padded 300 ms: the speech began at 2000
    [Heard("speech_confirmed", 2200.0), Heard("partial", 2300.0, "wait tell me more")],
    [Heard("speech_stopped", 2600.0), Heard("final", 3100.0, "wait tell me more")],
]


@pytest.mark.parametrize("harness", [([*TURN, *BARGE_IN_AT_THE_END], False)], indirect=True)
@pytest.mark.parametrize("reported", [False, True])
async def test_a_barge_in_as_the_model_played_the_reply_out_cuts_it_unless_the_listener_said_it_stopped(
    harness, reported
) -> None:
    rid = await answered_then(harness)  # 200 ms of reply audio, sent now
    if reported:
        harness.agent.played(rid, True, harness.clock.now)
        harness.agent.played(rid, False, harness.clock.now + 0.2)
    harness.clock.now += 0.3  # the model's end was 100 ms ago: a player behind it still plays
    feed_now(harness, 2)
    await harness.agent.caught_up(2.0)
    if reported:  # its player said it stopped: the words are a new turn, nothing is paused or cut
        assert not harness.of(ReplyPaused) and not harness.of(ReplyCut)
    else:  # what its player had left stops at once, then the words cut it
        assert harness.of(ReplyPaused)[0].reply_id == rid
        assert harness.of(ReplyCut)[0].reply_id == rid
    harness.feed(1)
    assert (await harness.until(UserTurn, 2)).text == "wait tell me more"
    await harness.until(ReplyStarted, 2)  # either way the words are answered


@pytest.mark.parametrize("harness", [([*TURN, *BARGE_IN_AT_THE_END], False)], indirect=True)
async def test_speech_that_began_after_the_players_lag_is_a_new_turn(harness) -> None:
    await answered_then(harness)
    harness.clock.now += 0.9  # the model's end was 700 ms ago, the speech began 200 ms ago
    feed_now(harness, 2)
    await harness.agent.caught_up(2.0)
    assert not harness.of(ReplyPaused) and not harness.of(ReplyCut)
    harness.feed(1)
    assert (await harness.until(UserTurn, 2)).text == "wait tell me more"
    await harness.until(ReplyStarted, 2)


@pytest.mark.parametrize("harness", [(TURN, True)], indirect=True)
async def test_a_stop_report_for_a_reply_still_being_said_is_not_taken(harness) -> None:
    harness.feed(4)
    started = await harness.until(ReplyStarted)
    assert isinstance(started, ReplyStarted)
    harness.agent.played(started.reply_id, False, harness.clock.now)  # its player ran dry mid-reply
    assert harness.agent.replies.speaking() and not started.playback.clock.stopped


# ---- the preemptive path over a real listener: a fake VAD (loud is speech) and a fake recogniser
# whose partials hear every chunk, so the one at the pause heard the speech to its end


class LoudVad(VoiceActivityDetector):
    sample_rate = 16000
    window_samples = 512  # 32 ms, as silero's

    def _score(self, window: np.ndarray) -> float:
        return 0.9 if float(np.abs(window).max()) > 0.01 else 0.05

    def _reset_state(self) -> None:
        pass


class WordsAsr(StreamingAsr):
    """Utterance ``i`` says ``utterances[i]``, a word per 200 ms heard (at least one); each chunk
    gives a partial, kept with the samples it heard; ``decodes`` counts the finals decoded."""

    def __init__(self, utterances: list[list[str]]) -> None:
        super().__init__()
        self.utterances = utterances
        self.index = -1
        self.heard = 0
        self.partial: tuple[int, Hypothesis] | None = None
        self.decodes = 0

    def _text(self) -> str:
        words = self.utterances[self.index]
        return " ".join(words[: 1 + self.heard // 3200])

    def _begin(self) -> None:
        self.index, self.heard, self.partial = self.index + 1, 0, None

    def _process(self, audio: np.ndarray) -> Hypothesis | None:
        self.heard += len(audio)
        self.partial = (self.heard, (self._text(), ()))
        return self.partial[1]

    def _end_covered(self, samples: int) -> Hypothesis | None:
        return self.partial[1] if self.partial is not None and self.partial[0] >= samples else None

    def _end(self) -> Hypothesis:
        self.decodes += 1
        return (self._text(), ())


def tone(ms: int) -> np.ndarray:
    return (0.3 * np.sin(np.arange(ms * 16) / 4)).astype(np.float32)


async def heard_live(asr: WordsAsr, audio: np.ndarray) -> Harness:
    """The agent hearing ``audio`` in 100 ms chunks through a real listener over ``asr``."""
    listener = Listener(LoudVad(), asr, TurnParams(silence_duration_ms=500), confirm_ms=150, speculate_at=0.1)
    h = Harness([], listener=listener)
    h.running = asyncio.create_task(h.agent.run())  # type: ignore[attr-defined]
    for i in range(0, len(audio), 1600):  # each heard before the next comes, as in real time
        h.clock.now += 0.1
        h.agent.feed(audio[i : i + 1600], h.clock.now)
        assert await h.agent.caught_up(5.0)
    return h


async def closed(h: Harness) -> None:
    h.running.cancel()  # type: ignore[attr-defined]
    await asyncio.gather(h.running, return_exceptions=True)  # type: ignore[attr-defined]
    await h.agent.close()
    await h.units.close()
    assert h.failures == []


async def test_a_reply_prepared_on_the_partial_that_heard_the_speech_is_released_unchanged() -> None:
    asr = WordsAsr([["good", "morning", "to", "you"]])
    quiet = np.zeros(1600, np.float32)
    h = await heard_live(asr, np.concatenate([quiet, quiet, tone(800), *[quiet] * 10]))
    try:
        report = await h.until(ReplyReport)
        assert asr.decodes == 0  # the pause's words were the last partial's: no final decode
        assert [e.text for e in h.of(UserTurn)] == ["good morning to you"]
        assert h.engine.asked == ["good morning to you"]  # prepared once at the pause, released
        assert [e.state for e in h.of(ReplyEnded)] == [S.DONE]
        assert report.figures.voice_to_voice_s is not None
    finally:
        await closed(h)


async def test_a_reply_prepared_on_a_partial_is_dropped_unheard_when_the_user_goes_on() -> None:
    asr = WordsAsr([["call", "my"], ["sister", "anne"]])
    quiet = np.zeros(1600, np.float32)
    audio = np.concatenate([quiet, quiet, tone(500), quiet, quiet, tone(400), *[quiet] * 10])
    h = await heard_live(asr, audio)
    try:
        await h.until(ReplyEnded, 2)
        discarded, said = h.of(ReplyEnded)
        assert (discarded.state, said.state) == (S.DISCARDED, S.DONE)
        assert asr.decodes == 0  # both utterances' words were their partials'
        assert h.engine.asked == ["call my", "call my sister anne"]
        assert [e.text for e in h.of(UserTurn)] == ["call my sister anne"]
        assert [e.reply_id for e in h.of(ReplyStarted)] == [said.reply_id]
        assert {a.reply_id for a in h.of(ReplyAudio)} == {said.reply_id}  # none of the dropped one's
    finally:
        await closed(h)


SPOKEN_WITH_QUIET = [
    [],
    [Heard("speech_started", 100.0)],
    [],
    [Heard("speech_confirmed", 250.0), Heard("partial", 300.0, "what")],
    [],
    [],
    [Heard("partial", 400.0, "what time")],
    [],
    [Heard("speech_stopped", 900.0), Heard("final", 1400.0, "what time is it")],
    [],
]


@pytest.mark.parametrize("paced", [True, False])
async def test_chunks_that_arrive_at_once_are_heard_once_each_in_order_as_if_they_came_one_by_one(
    paced: bool,
) -> None:
    """A worker that fell behind hears the queued chunks in trips of several (agent.hearing); what
    turn-taking makes of them, and in which order, is what it makes of them heard one by one."""
    h = Harness([list(c) for c in SPOKEN_WITH_QUIET])
    running = asyncio.create_task(h.agent.run())
    try:
        for _ in SPOKEN_WITH_QUIET:
            h.feed(1)
            if paced:
                assert await h.agent.caught_up(2.0)
        assert await h.agent.caught_up(2.0)
        await h.until(ReplyReport)
        listener = h.engine.listener
        assert listener.samples == len(SPOKEN_WITH_QUIET) * len(CHUNK)  # each heard once
        assert h.agent.hearing.backlog_ms == 0.0 and not h.agent.hearing.jobs
        kinds = h.kinds()
        assert kinds[:5] == ["SpeechStarted", "TranscriptDelta", "SpeechStopped", "UserTurn", "ReplyStarted"]
        assert h.of(UserTurn)[0].text == "what time is it" and h.engine.asked == ["what time is it"]
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await h.agent.close()
        await h.units.close()


async def test_closing_with_chunks_still_queued_ends_the_threads_and_leaves_nothing_running() -> None:
    h = Harness([])
    running = asyncio.create_task(h.agent.run())
    h.feed(30)  # 3 s of audio at once: several trips
    await asyncio.sleep(0)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    await h.agent.close()
    await h.units.close()
    assert not h.agent.input_thread.alive and h.agent.output_thread._shutdown
    with pytest.raises(RuntimeError):
        h.agent.input_thread.submit(print)
    assert h.failures == []
