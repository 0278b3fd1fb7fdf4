"""One reply's life with fake models and a fake clock: every move of its state machine, what it says
as agent events (no protocol), and what the user heard of it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from omnivox.agent.events import (
    ReplyAudio,
    ReplyCall,
    ReplyEnded,
    ReplyPaused,
    ReplyResumed,
    ReplySentence,
    ReplyStarted,
    ReplyState,
    ReplyText,
)
from omnivox.agent.pacing import LeadPacing
from omnivox.agent.playout import Playout
from omnivox.agent.reply import RATE, TRANSITIONS, Reply, ReplyPlan
from omnivox.core.errors import EngineFailure, IllegalTransition
from omnivox.core.transitions import terminal
from omnivox.voice.llm.base import LlmParams, ToolCallDelta, Usage
from omnivox.voice.reply import FirstToken, ReplyPiece, ReplyRequest, Spoken, Word, with_apology

S = ReplyState


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def tone(seconds: float) -> np.ndarray:
    return (0.2 * np.sin(np.arange(int(RATE * seconds)) / 5)).astype(np.float32)


def scripted(*pieces: ReplyPiece, then_wait: bool = False, fail: Exception | None = None):
    """Fake voice models' reply: ``pieces``, then optionally a wait for stop, or a failure."""
    started, stopped = threading.Event(), threading.Event()

    def produce(request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        started.set()
        yield from pieces
        if then_wait:
            stop.wait(5)
            stopped.set()
        if fail is not None:
            raise fail

    produce.started = started  # type: ignore[attr-defined]
    produce.stopped = stopped  # type: ignore[attr-defined]
    return produce


class Said:
    """A reply and everything it said (its events), with what an adapter dropped unsent."""

    def __init__(self, produce, executor, *, speak=True, held=False, clock=None, speech_end_at=None):
        self.clock = clock or Clock()
        self.events: list = []
        self.unsent_ms = 0.0  # audio the adapter still held when the reply was cut
        self.playout = Playout(self.clock)
        request = ReplyRequest([], LlmParams(max_tokens=50), speak=speak, voice="v")
        self.reply = Reply(
            ReplyPlan(request, "reply_1", speech_end_at),
            produce,
            self.events.append,
            self.playout.playback(),
            executor,
            LeadPacing(lead_ms=1e9),  # never paced: the fake clock does not move by itself
            held=held,
            clock=self.clock,
            drop_unsent=lambda reply_id: self.unsent_ms,
        )

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]

    def kinds(self) -> list[str]:
        return [type(e).__name__ for e in self.events]

    def ended(self) -> ReplyEnded:
        (end,) = self.of(ReplyEnded)
        return end

    async def until(self, kind: type, n: int = 1) -> None:
        for _ in range(500):
            if len(self.of(kind)) >= n:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"no {n} {kind.__name__}")


@pytest.fixture
def thread():
    pool = ThreadPoolExecutor(1, thread_name_prefix="agent-output")
    yield pool
    pool.shutdown(wait=True)


def test_the_table_has_every_state_and_four_ends() -> None:
    assert set(TRANSITIONS) == set(ReplyState)
    assert terminal(TRANSITIONS) == {S.DONE, S.CANCELLED, S.FAILED, S.DISCARDED}
    assert TRANSITIONS[S.HELD] == {S.SPEAKING, S.DISCARDED}
    assert TRANSITIONS[S.PAUSED] == {S.SPEAKING, S.CANCELLED, S.FAILED}


async def test_speaking_to_done_in_text_says_every_word_in_order(thread) -> None:
    said = Said(scripted(FirstToken(0.05), Word("Hello"), Word(" there.")), thread, speak=False)
    assert said.reply.state is S.SPEAKING
    assert await said.reply.run() is S.DONE
    assert said.kinds() == ["ReplyStarted", "ReplyText", "ReplyText", "ReplyEnded"]
    assert [e.text for e in said.of(ReplyText)] == ["Hello", " there."]
    end = said.ended()
    assert (end.state, end.written, end.heard, end.stopped_ms) == (
        S.DONE,
        "Hello there.",
        "Hello there.",
        None,
    )
    assert end.figures.llm_ttft_s == 0.05 and said.reply.settled and said.reply.ended.is_set()


async def test_speaking_audio_says_sentences_then_paced_frames_with_its_figures(thread) -> None:
    clock = Clock(now=10.0)
    produce = scripted(
        Word("Hi."),
        Spoken("Hi.", tone(0.25), synth_s=0.01, starts_sentence=True),
        Word(" Bye."),
        Spoken("Bye.", tone(0.1), synth_s=0.02, starts_sentence=True),
        Spoken("Bye.", tone(0.05), synth_s=0.03, starts_sentence=False),
        Usage(input_tokens=12, output_tokens=3),
    )
    said = Said(produce, thread, clock=clock, speech_end_at=9.4)
    assert await said.reply.run() is S.DONE
    assert [(e.text, e.index) for e in said.of(ReplySentence)] == [("Hi.", 0), ("Bye.", 1)]
    frames = said.of(ReplyAudio)
    assert [round(f.ms) for f in frames] == [100, 100, 50, 100, 50]  # 100 ms frames per piece
    assert said.kinds().index("ReplySentence") < said.kinds().index("ReplyAudio")
    playback = said.reply.playback
    assert playback.spans == ((0.0, "Hi."), (pytest.approx(250.0), "Bye.")) and playback.sent_ms == 400
    end = said.ended()
    assert end.heard == "Hi. Bye." and end.written == "Hi. Bye."
    figures = end.figures
    assert figures.voice_to_voice_s == pytest.approx(0.6)  # first audio at 10.0, speech ended at 9.4
    assert figures.tts_ttfa_s == pytest.approx(0.0)
    assert figures.tts_busy_s == pytest.approx(0.06) and figures.tts_audio_s == pytest.approx(0.4)
    assert figures.usage == Usage(input_tokens=12, output_tokens=3)


async def test_speaking_to_cancelled_keeps_what_was_heard_and_drops_what_was_not_sent(thread) -> None:
    clock = Clock(now=0.0)
    produce = scripted(Spoken("One two three four.", tone(1.0), 0.0, True), then_wait=True)
    said = Said(produce, thread, clock=clock)
    said.unsent_ms = 300  # the adapter had not sent the last 300 ms yet: dropped
    running = asyncio.create_task(said.reply.run())
    await said.until(ReplyAudio, 10)
    clock.now = 0.5  # the listener has played half a second when the user barges in
    said.reply.cancel("turn_detected")
    assert await asyncio.wait_for(running, 2) is S.CANCELLED
    await asyncio.to_thread(produce.stopped.wait, 2)  # the models were told to stop
    end = said.ended()
    assert end.stopped_ms == 500 and end.figures.reason == "turn_detected"
    # 700 ms reached the listener, 500 of it was heard: the words of the first 5/7 of the sentence
    assert end.heard == "One two three" and said.reply.playback.sent_ms == 700
    said.reply.cancel("client_cancelled")  # a second cancel changes nothing
    assert said.reply.state is S.CANCELLED and end.figures.reason == "turn_detected"


async def test_a_client_truncation_mid_reply_stops_it_where_the_client_says(thread) -> None:
    clock = Clock(now=0.0)
    produce = scripted(Spoken("One two three four.", tone(1.0), 0.0, True), then_wait=True)
    said = Said(produce, thread, clock=clock)
    running = asyncio.create_task(said.reply.run())
    await said.until(ReplyAudio, 10)
    clock.now = 0.8  # the clock models 800 ms played; the client says it played 250 ms
    said.reply.cancel("client_cancelled", heard_ms=250)
    assert await asyncio.wait_for(running, 2) is S.CANCELLED
    end = said.ended()
    assert (end.stopped_ms, end.heard, end.figures.reason) == (250, "One", "client_cancelled")


async def test_speaking_to_paused_and_back_says_where_and_sends_nothing_meanwhile(thread) -> None:
    clock = Clock(now=0.0)
    gate = threading.Event()

    def produce(request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        yield Spoken("First part.", tone(0.3), 0.0, True)
        gate.wait(5)
        yield Spoken("Second part.", tone(0.2), 0.0, True)

    said = Said(produce, thread, clock=clock)
    running = asyncio.create_task(said.reply.run())
    await said.until(ReplyAudio, 3)
    clock.now = 0.2
    assert said.reply.pause() and said.reply.state is S.PAUSED
    gate.set()  # the models go on: the next sentence comes, and waits
    await asyncio.sleep(0.1)
    assert len(said.of(ReplyAudio)) == 3 and said.of(ReplyPaused)[0].at_ms == pytest.approx(200)
    clock.now = 5.0  # however long the pause lasted, it plays on from where it stopped
    said.reply.resume("no_words")
    assert await asyncio.wait_for(running, 2) is S.DONE
    (resumed,) = said.of(ReplyResumed)
    assert resumed.at_ms == pytest.approx(200) and resumed.reason == "no_words"
    assert said.ended().heard == "First part. Second part."  # every sample said once


async def test_paused_to_cancelled_cuts_it_where_it_paused(thread) -> None:
    clock = Clock(now=0.0)
    said = Said(
        scripted(Spoken("One two three four.", tone(1.0), 0.0, True), then_wait=True), thread, clock=clock
    )
    running = asyncio.create_task(said.reply.run())
    await said.until(ReplyAudio, 10)
    clock.now = 0.5
    said.reply.pause()
    clock.now = 3.0  # judged words a while later: it was heard up to the pause
    said.reply.cancel("turn_detected")
    assert await asyncio.wait_for(running, 2) is S.CANCELLED
    assert said.ended().stopped_ms == pytest.approx(500)


async def test_a_finished_reply_still_playing_pauses_and_resumes_its_playback_alone(thread) -> None:
    clock = Clock(now=0.0)
    said = Said(scripted(Spoken("All of it.", tone(1.0), 0.0, True)), thread, clock=clock)
    assert await said.reply.run() is S.DONE
    clock.now = 0.4  # 600 ms still to play at the listener
    assert said.reply.pause() and said.reply.state is S.DONE
    assert said.of(ReplyPaused)[0].at_ms == pytest.approx(400)
    said.reply.resume("backchannel")
    assert said.of(ReplyResumed)[0].at_ms == pytest.approx(400)
    clock.now = 9.0  # all of it played: nothing to pause
    assert not said.reply.pause()


async def test_a_reply_played_out_by_the_model_pauses_at_its_end_for_speech_at_its_end(thread) -> None:
    clock = Clock(now=0.0)
    said = Said(scripted(Spoken("Shall I book it?", tone(1.0), 0.0, True)), thread, clock=clock)
    assert await said.reply.run() is S.DONE
    clock.now = 1.2  # over by the model; the listener's player may still be playing its last words
    assert said.reply.pause(at_end=True)
    assert said.of(ReplyPaused)[0].at_ms == pytest.approx(1000)  # what the player has left waits
    said.reply.resume("backchannel")
    assert said.of(ReplyResumed)[0].at_ms == pytest.approx(1000)
    said.reply.playback.stop()
    assert not said.reply.pause(at_end=True)  # cut: nothing of it plays any more


async def test_speaking_to_failed_without_an_apology(thread) -> None:
    said = Said(scripted(Word("Par"), fail=EngineFailure("the LLM server went away")), thread, speak=False)
    assert await said.reply.run() is S.FAILED
    end = said.ended()
    assert end.state is S.FAILED and end.figures.error is not None
    assert end.figures.error.code == "engine_error" and end.written == "Par"


async def test_a_reply_that_could_not_be_made_says_its_apology_and_is_done(thread) -> None:
    def failing(request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        raise ConnectionError("refused")
        yield  # (a generator)

    def produce(request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        apologetic = ReplyRequest(request.messages, request.llm, speak=False, apology="Sorry, try again.")
        return with_apology(failing(request, stop), None, apologetic, stop)

    said = Said(produce, thread, speak=False)
    assert await said.reply.run() is S.DONE
    end = said.ended()
    assert end.figures.error is not None and end.figures.error.code == "internal_error"
    assert end.heard == "Sorry, try again."


async def test_held_says_nothing_until_released_then_speaks(thread) -> None:
    clock = Clock(now=5.0)
    produce = scripted(Word("Sure."), Spoken("Sure.", tone(0.1), 0.0, True))
    said = Said(produce, thread, held=True, clock=clock)
    assert said.reply.state is S.HELD and said.reply.idle
    running = asyncio.create_task(said.reply.run())
    await asyncio.to_thread(produce.started.wait, 2)  # the models are already at work
    await asyncio.sleep(0.05)
    assert said.events == []  # held: not a single event
    clock.now = 6.0
    said.reply.release(speech_end_at=5.9)
    assert await asyncio.wait_for(running, 2) is S.DONE
    assert isinstance(said.events[0], ReplyStarted)
    assert said.ended().figures.voice_to_voice_s == pytest.approx(0.1)


async def test_held_to_discarded_says_only_that_it_ended(thread) -> None:
    produce = scripted(Word("maybe"), then_wait=True)
    said = Said(produce, thread, held=True)
    running = asyncio.create_task(said.reply.run())
    await asyncio.sleep(0.05)
    said.reply.discard()
    assert await asyncio.wait_for(running, 2) is S.DISCARDED
    assert said.kinds() == ["ReplyEnded"] and said.ended().state is S.DISCARDED
    assert produce.stopped.is_set()  # the models were told to stop too


async def test_cancelling_a_held_reply_discards_it(thread) -> None:
    said = Said(scripted(Word("x")), thread, held=True)
    said.reply.cancel("turn_detected")
    assert said.reply.state is S.DISCARDED
    assert await said.reply.run() is S.DISCARDED


async def test_moves_the_table_forbids_raise(thread) -> None:
    held = Said(scripted(), thread, held=True).reply
    held.discard()
    with pytest.raises(IllegalTransition):
        held.release(None)
    speaking = Said(scripted(), thread).reply
    with pytest.raises(IllegalTransition):
        speaking.discard()  # only a held reply can be discarded


async def test_function_calls_are_said_as_calls(thread) -> None:
    said = Said(scripted(ToolCallDelta(0, "call_1", "weather", '{"city": "Paris"}')), thread, speak=False)
    assert await said.reply.run() is S.DONE
    (call,) = said.of(ReplyCall)
    assert (call.call.name, call.call.arguments) == ("weather", '{"city": "Paris"}')


async def test_a_reply_times_its_stages_on_its_clock(thread) -> None:
    clock = Clock(now=20.0)

    def produce(request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        clock.now = 20.2
        yield FirstToken(0.2)
        yield Word("Hi.")
        clock.now = 20.5  # the TTS took 0.1 s of this
        yield Spoken("Hi.", tone(0.1), synth_s=0.1, starts_sentence=True)

    said = Said(produce, thread, clock=clock, speech_end_at=19.5)
    assert await said.reply.run() is S.DONE
    figures = said.ended().figures
    marks = figures.times.marks()
    assert marks == {
        "llm_first_token": pytest.approx(0.7),
        "first_words": pytest.approx(0.9),
        "tts_first_audio": pytest.approx(1.0),
        "first_audio_sent": pytest.approx(1.0),
    }
    assert marks["first_audio_sent"] == pytest.approx(figures.voice_to_voice_s)
