"""A realtime response: an agent reply driven by a fake engine and a fake clock, worded as OpenAI
events and items in every state of its enum."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from omnivox.agent.events import ReplyState as ResponseState
from omnivox.agent.pacing import LeadPacing
from omnivox.agent.playout import Playback
from omnivox.agent.reply import TRANSITIONS, Reply, ReplyPlan
from omnivox.core.errors import EngineFailure, IllegalTransition
from omnivox.core.transitions import terminal
from omnivox.protocol.realtime import events as ev
from omnivox.protocol.realtime.session_config import AudioFormat
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.reply import FirstToken, ReplyPiece, ReplyRequest, Spoken, Word
from omnivox.worker.realtime.audio_io import OutputEncoder
from omnivox.worker.realtime.conversation import Conversation, Item
from omnivox.worker.realtime.response import Response
from omnivox.worker.realtime.response_wire import ResponsePlan

RATE = 24000


class Recorder:
    """Stands in for the session's Events: what was said, and what a cancel dropped."""

    def __init__(self) -> None:
        self.events: list = []
        self.unwritten_ms = 0.0  # audio a cancel finds still in the outbox
        self.deltas = 0
        self.enough = asyncio.Event()  # ``want`` audio deltas were put
        self.want = 1

    def put(self, event, *, response_id: str | None = None, audio_ms: float = 0.0) -> None:
        self.events.append(event)
        if isinstance(event, ev.AudioDelta):
            self.deltas += 1
            if self.deltas >= self.want:
                self.enough.set()

    def drop_audio(self, response_id: str) -> float:
        return self.unwritten_ms

    def types(self) -> list[str]:
        return [e.type for e in self.events]


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def tone(seconds: float) -> np.ndarray:
    return (0.2 * np.sin(np.arange(int(RATE * seconds)) / 5)).astype(np.float32)


def scripted(*pieces: ReplyPiece, then_wait: bool = False, fail: Exception | None = None):
    """A fake engine.reply: yields ``pieces``; optionally waits for stop, or fails, at the end."""
    started = threading.Event()

    def produce(request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        started.set()
        yield from pieces
        if then_wait:
            stop.wait(5)
        if fail is not None:
            raise fail

    produce.started = started  # type: ignore[attr-defined]
    return produce


@pytest.fixture
def thread():
    pool = ThreadPoolExecutor(1)
    yield pool
    pool.shutdown(wait=True)


def make(produce, thread, *, speak=True, held=False, clock=None, conversation=None, speech_end_at=None):
    conversation = conversation or Conversation()
    recorder = Recorder()
    conversation.emit = recorder.put
    item = Item(role="assistant", audio=speak, status="in_progress")  # joins the conversation when it opens
    plan = ResponsePlan(
        response_id="resp_1",
        item=item,
        request=ReplyRequest([], LlmParams(max_tokens=50), speak=speak, voice="v"),
    )
    clock = clock or Clock()
    wire = Response(plan, recorder, conversation, OutputEncoder(AudioFormat()))  # type: ignore[arg-type]
    reply = Reply(
        ReplyPlan(plan.request, plan.response_id, speech_end_at),
        produce,
        wire.on_event,
        Playback(clock),
        thread,
        LeadPacing(lead_ms=1e9),  # never paced: the fake clock does not move by itself
        held=held,
        clock=clock,
        drop_unsent=recorder.drop_audio,
    )
    WORDED[reply.reply_id] = wire
    return reply, recorder, conversation


WORDED: dict[str, Response] = {}


def item_of(reply: Reply):
    """The assistant item ``reply`` fills."""
    return WORDED[reply.reply_id].plan.item


def test_the_table_has_the_states_the_design_names_and_four_ends() -> None:
    assert set(TRANSITIONS) == set(ResponseState)
    assert terminal(TRANSITIONS) == {
        ResponseState.DONE,
        ResponseState.CANCELLED,
        ResponseState.FAILED,
        ResponseState.DISCARDED,
    }
    assert TRANSITIONS[ResponseState.HELD] == {ResponseState.SPEAKING, ResponseState.DISCARDED}


async def test_speaking_to_done_in_text_sends_every_event_in_order(thread) -> None:
    produce = scripted(FirstToken(0.05), Word("Hello"), Word(" there."))
    response, rec, conversation = make(produce, thread, speak=False)
    assert response.state is ResponseState.SPEAKING
    assert await response.run() is ResponseState.DONE
    assert rec.types() == [
        "response.created",
        "rate_limits.updated",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    done = rec.events[-1].response
    assert done["status"] == "completed" and done["output"][0]["content"][0]["text"] == "Hello there."
    assert done["usage"]["output_tokens"] > 0
    assert response.figures.llm_ttft_s == 0.05
    assert conversation.get(item_of(response).id).status == "completed"


async def test_speaking_audio_sends_sentences_and_paced_deltas_with_figures(thread) -> None:
    clock = Clock(now=10.0)
    produce = scripted(
        FirstToken(0.1),
        Word("Hi."),
        Spoken("Hi.", tone(0.25), synth_s=0.01, starts_sentence=True),
        Word(" Bye."),
        Spoken("Bye.", tone(0.1), synth_s=0.02, starts_sentence=True),
        Spoken("Bye.", tone(0.05), synth_s=0.03, starts_sentence=False),
    )
    response, rec, _ = make(produce, thread, clock=clock, speech_end_at=9.4)
    assert await response.run() is ResponseState.DONE
    transcript = [e.delta for e in rec.events if isinstance(e, ev.AudioTranscriptDelta)]
    assert transcript == ["Hi.", " Bye."]  # one per sentence, words are not sent as text
    assert not any(isinstance(e, ev.TextDelta) for e in rec.events)
    audio = [e for e in rec.events if isinstance(e, ev.AudioDelta)]
    assert len(audio) == 3 + 1 + 1  # 250 ms in 100 ms frames, then 100 ms, then 50 ms
    item = item_of(response)
    assert item.text == "Hi. Bye." and item.audio_ms == pytest.approx(400, abs=1)
    assert response.playback.spans == ((0.0, "Hi."), (pytest.approx(250.0), "Bye."))
    figures = response.figures
    assert figures.voice_to_voice_s == pytest.approx(0.6)  # first audio at 10.0, speech ended at 9.4
    assert figures.tts_ttfa_s == pytest.approx(0.0)
    assert figures.tts_busy_s == pytest.approx(0.06) and figures.tts_audio_s == pytest.approx(0.4)


async def test_speaking_to_cancelled_keeps_only_what_was_heard(thread) -> None:
    clock = Clock(now=0.0)
    produce = scripted(
        Spoken("One two three four.", tone(1.0), synth_s=0.0, starts_sentence=True),
        then_wait=True,
    )
    response, rec, _ = make(produce, thread, clock=clock)
    rec.want = 10  # the whole second of audio was put out
    rec.unwritten_ms = 300  # of which the last 300 ms had not left the outbox yet: dropped
    running = asyncio.create_task(response.run())
    await asyncio.wait_for(rec.enough.wait(), 2)
    clock.now = 0.5  # the client has played half a second when the user barges in
    response.cancel("turn_detected")
    assert await asyncio.wait_for(running, 2) is ResponseState.CANCELLED
    truncated = [e for e in rec.events if isinstance(e, ev.ItemTruncated)]
    assert truncated and truncated[0].audio_end_ms == 500
    item = item_of(response)
    # 700 ms reached the client, 500 ms of it were heard: the words of the first 5/7 of the sentence
    assert item.text == "One two three" and item.status == "incomplete"
    assert item.audio_ms == 500  # a later truncation is bounded by what was heard
    done = rec.events[-1].response
    assert done["status"] == "cancelled" and done["status_details"]["reason"] == "turn_detected"
    response.cancel("client_cancelled")  # a second cancel changes nothing
    assert response.state is ResponseState.CANCELLED and response.figures.reason == "turn_detected"


async def test_the_item_knows_its_audio_as_sent_and_a_client_cut_keeps_the_clients_point(thread) -> None:
    clock = Clock(now=0.0)
    produce = scripted(
        Spoken("One two three four.", tone(1.0), synth_s=0.0, starts_sentence=True),
        then_wait=True,
    )
    response, rec, _ = make(produce, thread, clock=clock)
    rec.want = 10
    running = asyncio.create_task(response.run())
    await asyncio.wait_for(rec.enough.wait(), 2)
    item = item_of(response)
    assert item.status == "in_progress" and item.audio_ms == pytest.approx(1000)  # before the end
    clock.now = 0.8  # the play clock models 800 ms played; the client says it played 250 ms
    response.cancel("client_cancelled", heard_ms=250)
    assert await asyncio.wait_for(running, 2) is ResponseState.CANCELLED
    truncated = [e for e in rec.events if isinstance(e, ev.ItemTruncated)]
    assert [t.audio_end_ms for t in truncated] == [250]  # once, where the client said
    assert item.text == "One" and item.audio_ms == 250


async def test_speaking_to_failed_reports_the_error_in_response_done(thread) -> None:
    produce = scripted(Word("Par"), fail=EngineFailure("the LLM server went away"))
    response, rec, _ = make(produce, thread, speak=False)
    assert await response.run() is ResponseState.FAILED
    details = rec.events[-1].response["status_details"]
    assert details["type"] == "failed" and details["error"]["code"] == "engine_error"
    assert response.figures.error is not None and item_of(response).status == "incomplete"


async def test_held_says_nothing_until_released_then_speaks(thread) -> None:
    clock = Clock(now=5.0)
    produce = scripted(Word("Sure."), Spoken("Sure.", tone(0.1), 0.0, True))
    conversation = Conversation()
    response, rec, _ = make(produce, thread, held=True, clock=clock, conversation=conversation)
    assert response.state is ResponseState.HELD
    running = asyncio.create_task(response.run())
    await asyncio.to_thread(produce.started.wait, 2)  # the engine is already at work
    await asyncio.sleep(0.05)
    assert rec.events == []  # held: not a single event
    conversation.add(item_of(response))
    clock.now = 6.0
    response.release(speech_end_at=5.9)
    assert await asyncio.wait_for(running, 2) is ResponseState.DONE
    assert rec.types()[0] == "response.created"
    assert response.figures.voice_to_voice_s == pytest.approx(0.1)


async def test_held_to_discarded_leaves_no_trace(thread) -> None:
    stopped = threading.Event()

    def produce(request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        yield Word("maybe")
        stop.wait(5)
        stopped.set()

    response, rec, _ = make(produce, thread, held=True)
    running = asyncio.create_task(response.run())
    await asyncio.sleep(0.05)
    response.discard()
    assert await asyncio.wait_for(running, 2) is ResponseState.DISCARDED
    assert rec.events == [] and stopped.is_set()  # the engine was told to stop too


async def test_cancelling_a_held_response_discards_it(thread) -> None:
    response, rec, _ = make(scripted(Word("x")), thread, held=True)
    response.cancel("turn_detected")
    assert response.state is ResponseState.DISCARDED
    assert await response.run() is ResponseState.DISCARDED and rec.events == []


async def test_moves_the_table_forbids_raise(thread) -> None:
    response, _, _ = make(scripted(), thread, held=True)
    response.discard()
    with pytest.raises(IllegalTransition):
        response.release(None)
    speaking, _, _ = make(scripted(), thread)
    with pytest.raises(IllegalTransition):
        speaking.discard()  # only a held response can be discarded


async def test_an_out_of_band_response_sends_no_conversation_events(thread) -> None:
    response, rec, _ = make(scripted(Word("ok")), thread, speak=False)
    WORDED[response.reply_id].plan.in_conversation = False
    await response.run()
    assert "conversation.item.added" not in rec.types() and "conversation.item.done" not in rec.types()
    assert rec.events[-1].response["conversation_id"] is None


async def test_a_tool_only_reply_has_function_call_items_and_no_message(thread) -> None:
    from omnivox.voice.llm.base import ToolCallDelta, Usage

    produce = scripted(
        FirstToken(0.05),
        ToolCallDelta(0, "call_1", "weather", '{"ci'),
        ToolCallDelta(0, None, None, 'ty": "Paris"}'),
        ToolCallDelta(1, "call_2", "time", ""),
        Usage(input_tokens=30, output_tokens=9),
    )
    response, rec, conversation = make(produce, thread, speak=True)
    assert await response.run() is ResponseState.DONE
    assert rec.types() == [
        "response.created",
        "rate_limits.updated",
        "response.output_item.added",
        "conversation.item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.output_item.added",
        "conversation.item.added",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    done = rec.events[-1].response
    assert [(o["type"], o["call_id"], o["arguments"]) for o in done["output"]] == [
        ("function_call", "call_1", '{"city": "Paris"}'),
        ("function_call", "call_2", ""),
    ]
    assert [e.output_index for e in rec.events if isinstance(e, ev.OutputItemAdded)] == [0, 1]
    assert (done["usage"]["input_tokens"], done["usage"]["output_token_details"]["text_tokens"]) == (30, 9)
    assert done["usage"]["output_token_details"]["audio_tokens"] == 0  # nothing was spoken
    assert [i.type for i in conversation] == ["function_call", "function_call"]  # no empty message


async def test_a_cancelled_call_is_incomplete(thread) -> None:
    from omnivox.voice.llm.base import ToolCallDelta

    produce = scripted(ToolCallDelta(0, "call_1", "weather", "{"), then_wait=True)
    response, rec, _ = make(produce, thread, speak=False)
    task = asyncio.create_task(response.run())
    for _ in range(500):  # the call's first piece is out
        if "response.function_call_arguments.delta" in rec.types():
            break
        await asyncio.sleep(0.01)
    response.cancel("client_cancelled")
    assert await task is ResponseState.CANCELLED
    done = rec.events[-1].response
    assert done["status"] == "cancelled" and done["output"][0]["status"] == "incomplete"


async def test_a_reply_that_could_not_be_made_says_its_apology_and_completes(thread) -> None:
    from omnivox.voice.reply import ReplyFailed

    produce = scripted(
        ReplyFailed(ConnectionError("refused")),
        Word("Sorry."),
        Spoken("Sorry.", tone(0.1), synth_s=0.0, starts_sentence=True),
    )
    response, rec, _ = make(produce, thread)
    assert await response.run() is ResponseState.DONE
    assert response.figures.error is not None and response.figures.error.code == "internal_error"
    assert item_of(response).text == "Sorry." and rec.events[-1].response["status"] == "completed"


async def test_a_reply_that_fails_before_any_output_leaves_no_item(thread) -> None:
    """LiveKit keeps every assistant item it is told of: a failed turn must not leave an empty one."""
    produce = scripted(fail=EngineFailure("the LLM server went away"))
    response, rec, conversation = make(produce, thread, speak=False)
    assert await response.run() is ResponseState.FAILED
    assert rec.events[-1].response["output"] == []
    assert not [e for e in rec.events if isinstance(e, ev.OutputItemAdded | ev.ItemAdded)]
    assert len(conversation) == 0
