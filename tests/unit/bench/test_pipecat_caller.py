"""The pipecat caller's wire (pipecat's protobuf frames, RTVI messages) and what it makes of the
frames a pipecat bot sends."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pipecat.frames.protobufs import frames_pb2

from omnivox.bench.pipecat_caller import PipecatCaller, audio_message, parse_message, rtvi_message
from omnivox.testing.cluster import free_port


def bot_audio(samples: np.ndarray, rate: int = 24000) -> bytes:
    frame = frames_pb2.Frame()
    frame.audio.audio = samples.astype("<i2").tobytes()
    frame.audio.sample_rate = rate
    frame.audio.num_channels = 1
    return bytes(frame.SerializeToString())


def bot_rtvi(kind: str, data: dict | None = None) -> bytes:
    frame = frames_pb2.Frame()
    frame.message.data = json.dumps({"label": "rtvi-ai", "type": kind, "data": data or {}})
    return bytes(frame.SerializeToString())


def test_the_microphone_sends_pcm16_audio_frames_at_16_khz():
    frame = frames_pb2.Frame.FromString(audio_message(np.array([0.0, 0.5, -1.0], np.float32)))
    assert frame.WhichOneof("frame") == "audio"
    assert frame.audio.sample_rate == 16000 and frame.audio.num_channels == 1
    assert np.frombuffer(frame.audio.audio, "<i2").tolist()[0] == 0 and len(frame.audio.audio) == 6


def test_client_ready_is_an_rtvi_message_frame():
    frame = frames_pb2.Frame.FromString(rtvi_message("client-ready", {"version": "1.0.0"}))
    body = json.loads(frame.message.data)
    assert body == {"label": "rtvi-ai", "type": "client-ready", "id": "1", "data": {"version": "1.0.0"}}


def test_the_bots_frames_are_read_as_audio_rtvi_or_their_kind():
    kind, samples = parse_message(bot_audio(np.array([1, -2, 3], np.int16)))
    assert kind == "audio" and samples.tolist() == [1, -2, 3]
    assert parse_message(bot_rtvi("bot-ready")) == (
        "rtvi",
        {"label": "rtvi-ai", "type": "bot-ready", "data": {}},
    )
    text = frames_pb2.Frame()
    text.text.text = "hello"
    assert parse_message(bytes(text.SerializeToString())) == ("text", None)
    with pytest.raises(ValueError, match="binary"):
        parse_message("a text message")


class Replay:
    def __init__(self, messages: list[bytes]) -> None:
        self.messages = messages

    def __aiter__(self):
        return self._gen()

    async def _gen(self):
        for m in self.messages:
            yield m


async def test_a_reply_is_over_when_the_bot_stops_speaking_once_it_has_all_been_produced():
    caller = PipecatCaller("ws://nowhere/ws", [], chunk_ms=40)
    caller.timer.expect_reply(0.0)  # long ago, on the monotonic clock
    loud = np.full(2400, 4000, np.int16)
    first_sentence = [bot_rtvi("bot-ready"), bot_rtvi("bot-llm-started"), bot_audio(loud)]
    # the output ran dry between two sentences: pipecat says the bot stopped, the reply goes on
    await caller.read_messages(Replay([*first_sentence, bot_rtvi("bot-stopped-speaking")]))
    assert caller.bot_ready.is_set() and not caller.timer.reply_done.is_set()
    rest = [bot_rtvi("bot-llm-stopped"), bot_audio(loud), bot_rtvi("bot-tts-stopped")]
    await caller.read_messages(Replay([*rest, bot_rtvi("bot-stopped-speaking")]))
    assert caller.timer.reply_done.is_set() and caller.produced == set()
    assert len(caller.stats.v2v_s) == 1 and len(caller.stats.heard_s) == 1 and caller.stats.errors == []


async def test_rtvi_errors_are_counted():
    caller = PipecatCaller("ws://nowhere/ws", [], chunk_ms=40)
    await caller.read_messages(Replay([bot_rtvi("error", {"error": "LLM unreachable"})]))
    assert caller.stats.errors == ["rtvi error: LLM unreachable"]


async def test_a_bot_that_is_not_there_is_one_connection_error():
    caller = PipecatCaller(f"ws://127.0.0.1:{free_port()}/ws", [], chunk_ms=40)
    stats = await caller.run(turns=1, offset_s=0.0)
    assert stats.errors == ["connection: ConnectionRefusedError"] and stats.v2v_s == []
