"""The replies of one session: prefills between replies, prepared replies released or dropped (fake
models, a fake clock; the output thread is a real one-thread executor)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from omnivox.agent.events import ReplyAudio, ReplyEnded, ReplyState
from omnivox.agent.pacing import LeadPacing
from omnivox.agent.playout import Playout
from omnivox.agent.replies import Replies, same_words
from omnivox.agent.reply import Reply, ReplyPlan
from omnivox.connection.units import WorkUnits
from omnivox.core.errors import InvalidMessage
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.reply import FirstToken, ReplyPiece, ReplyRequest, Spoken, Word


def request(words: str) -> ReplyRequest:
    return ReplyRequest([ChatMessage(role="user", content=words)], LlmParams())


class Models:
    """Replies say the user's words back with 100 ms of tone; prefills are recorded."""

    def __init__(self) -> None:
        self.prefilled: list[str] = []
        self.asked: list[str] = []

    def reply(self, req: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        self.asked.append(req.messages[-1].text())
        yield FirstToken(0.01)
        yield Word("Yes.")
        yield Spoken("Yes.", np.full(2400, 0.1, np.float32), 0.001, True)

    def prefill(self, req: ReplyRequest) -> None:
        self.prefilled.append(req.messages[-1].text())


class Side:
    def __init__(self) -> None:
        self.models = Models()
        self.events: list[object] = []
        self.failures: list[BaseException] = []
        self.finished: list[Reply] = []
        self.executor = ThreadPoolExecutor(1)
        self.units = WorkUnits(lambda name, exc: self.failures.append(exc))
        self.replies = Replies(
            produce=self.models.reply,
            prefill=self.models.prefill,
            emit=self.events.append,
            playout=Playout(lambda: 100.0),
            units=self.units,
            executor=self.executor,
            pacing=LeadPacing(lead_ms=1e9),
            on_finished=self._finished,
            clock=lambda: 100.0,
        )

    async def _finished(self, reply: Reply) -> None:
        self.finished.append(reply)

    def block(self) -> threading.Event:
        """Hold the output thread (a reply or a prefill still running) until the event is set."""
        gate = threading.Event()
        self.executor.submit(gate.wait, 5)
        return gate

    async def drained(self) -> None:
        await asyncio.wrap_future(self.executor.submit(lambda: None))

    def ended(self) -> list[ReplyEnded]:
        return [e for e in self.events if isinstance(e, ReplyEnded)]


@pytest.fixture
async def side() -> AsyncIterator[Side]:
    s = Side()
    yield s
    await s.replies.stop()
    await s.units.close()
    s.executor.shutdown(wait=True)
    assert s.failures == []


async def test_only_the_newest_prefill_runs_once_the_output_thread_is_free(side) -> None:
    gate = side.block()
    for words in ["", "call", "call my"]:
        side.replies.prefill(lambda words=words: request(words))
    gate.set()
    await side.drained()
    assert side.models.prefilled == ["call my"]


async def test_a_prefill_whose_prompt_cannot_be_planned_is_skipped(side) -> None:
    def refused() -> ReplyRequest:
        raise InvalidMessage("tool_choice names no tool")

    side.replies.prefill(refused)  # the session goes on; the reply's own plan will say it
    side.replies.prefill(lambda: request("call"))
    await side.drained()
    assert side.models.prefilled == ["call"]


async def test_a_reply_makes_the_prefills_not_begun_moot_and_none_is_asked_while_it_runs(side) -> None:
    gate = side.block()
    side.replies.prefill(lambda: request("call my"))
    await side.replies.speculate(lambda: ReplyPlan(request("call my sister")), "call my sister")
    side.replies.prefill(lambda: request("call my sister at"))  # held: the LLM is the reply's
    gate.set()
    for _ in range(200):  # the reply's task hands its work to the output thread in its own time
        if side.models.asked:
            break
        await asyncio.sleep(0.005)
    await side.drained()
    assert side.models.prefilled == [] and side.models.asked == ["call my sister"]


async def test_a_held_reply_is_released_for_the_same_words_and_sends_its_audio(side) -> None:
    await side.replies.speculate(lambda: ReplyPlan(request("good morning")), "good morning")
    assert await side.replies.confirm("Good morning!", speech_end_at=99.5)
    for _ in range(200):
        if side.finished:
            break
        await asyncio.sleep(0.005)
    (end,) = side.ended()
    assert end.state is ReplyState.DONE and end.figures.voice_to_voice_s == pytest.approx(0.5)
    assert [e.reply_id for e in side.events if isinstance(e, ReplyAudio)] == [end.reply_id]


async def test_a_held_reply_for_other_words_is_dropped_without_a_sample_sent(side) -> None:
    await side.replies.speculate(lambda: ReplyPlan(request("call my")), "call my")
    await side.drained()  # it has written and spoken its words, held
    assert not await side.replies.confirm("call my sister", speech_end_at=None)
    (end,) = side.ended()
    assert end.state is ReplyState.DISCARDED and side.finished == []
    assert not [e for e in side.events if isinstance(e, ReplyAudio)]
    assert side.replies.active is None and side.replies.held is None


async def test_a_held_reply_writes_and_speaks_its_first_words_before_release_and_sends_at_once(side) -> None:
    await side.replies.speculate(lambda: ReplyPlan(request("good morning")), "good morning")
    for _ in range(200):  # the reply's task hands its work to the output thread in its own time
        if side.models.asked:
            break
        await asyncio.sleep(0.005)
    await side.drained()  # the models have written and spoken the whole reply, held
    held = side.replies.held
    assert held is not None and held.figures.times.tts_first_audio is not None
    assert side.models.asked == ["good morning"]
    assert not [e for e in side.events if isinstance(e, ReplyAudio)]  # nothing sent while held
    assert await side.replies.confirm("good morning", speech_end_at=99.0)
    for _ in range(200):
        if side.finished:
            break
        await asyncio.sleep(0.005)
    audio = [e for e in side.events if isinstance(e, ReplyAudio)]
    assert [e.reply_id for e in audio] == [held.reply_id] and side.models.asked == ["good morning"]


async def test_a_held_reply_is_dropped_unheard_when_the_user_goes_on(side) -> None:
    await side.replies.speculate(lambda: ReplyPlan(request("call my")), "call my")
    await side.drained()
    await side.replies.discard_speculation()  # the user speaks again
    (end,) = side.ended()
    assert end.state is ReplyState.DISCARDED and side.replies.held is None
    assert not await side.replies.confirm("call my", speech_end_at=None)  # nothing left to release
    assert not [e for e in side.events if isinstance(e, ReplyAudio)] and side.finished == []


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("good morning", "Good morning.", True),
        ("what's the time", "What's the time?", True),
        ("call my", "call my sister", False),
        ("two", "to", False),
    ],
)
def test_same_words_sets_case_and_punctuation_aside(a: str, b: str, same: bool) -> None:
    assert same_words(a, b) is same
