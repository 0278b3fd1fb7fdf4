"""Each protocol reads its own frames as timeline events (what recording consumes, knowing no protocol)."""

from __future__ import annotations

import base64
import json

import numpy as np

from omnivox.audio.pcm import float32_to_b64, pcm16_to_b64
from omnivox.protocol.control.internal import Metrics
from omnivox.protocol.registry import PROTOCOLS, by_name
from omnivox.protocol.timelines.reader import (
    AssistantCutOff,
    Audio,
    Config,
    ErrorEvent,
    Image,
    Marker,
    RecordChoice,
    Text,
    TurnEnd,
    TurnFigures,
    TurnStages,
    TurnStart,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"rest"
JPEG = b"\xff\xd8\xff\xe0rest"


def frames(reader, *sent):
    """Events of ``(from_client, message)`` pairs, in order."""
    out = []
    for from_client, msg in sent:
        out += reader.read(from_client, msg if isinstance(msg, str) else json.dumps(msg))
    return out


def kinds(events):
    return [type(e).__name__ for e in events]


def test_every_protocol_reads_its_frames_for_recording():
    for protocol in PROTOCOLS:
        assert protocol.timeline_reader() is not None, protocol.name
        assert protocol.timeline_reader() is not protocol.timeline_reader()  # one per session


def test_frames_no_reader_can_make_sense_of_say_nothing():
    for protocol in PROTOCOLS:
        reader = protocol.timeline_reader()
        for junk in ("", "{", "[]", '{"type": 3}', '{"type":"audio_chunk"}', b"\x00binary", "null"):
            assert reader.read(True, junk) == [] and reader.read(False, junk) == []
        bad_b64 = {"type": "audio_chunk", "audio_base64": "%%%"}
        assert reader.read(True, json.dumps(bad_b64)) == []


def test_frames_a_recording_cannot_keep_say_nothing():
    """A lone surrogate cannot be written as UTF-8; nesting past Python's recursion limit cannot be
    parsed: the recorder read them and logged a traceback each (found by bench fuzz)."""
    deep = '{"type": "x", "v": ' + "[" * 5000 + "]" * 5000 + "}"
    surrogate = {
        "streaming": '{"type": "prefill", "messages": [{"role": "user", "content": "\\ud800"}]}',
        "duplex": '{"type": "prepare", "system_prompt": "\\ud800"}',
        "realtime": '{"type": "conversation.item.create", "event_id": "\\ud800", "item": {"type": "message",'
        ' "role": "user", "content": [{"type": "input_text", "text": "\\ud800"}]}}',
    }
    for protocol in PROTOCOLS:
        reader = protocol.timeline_reader()
        assert reader.read(True, deep) == [] and reader.read(False, deep) == []
        if protocol.name in surrogate:
            assert reader.read(True, surrogate[protocol.name]) == [], protocol.name


def test_internal_metrics_are_figures_of_the_turn():
    reader = by_name("realtime").timeline_reader()
    frame = Metrics(voice_to_voice_s=0.4, llm_ttft_s=0.1, response_done=True).model_dump_json()
    (figures,) = reader.read(False, frame)
    assert isinstance(figures, TurnFigures) and figures.values == {"voice_to_voice_s": 0.4, "llm_ttft_s": 0.1}
    assert reader.read(False, Metrics(asr_busy_s=1.0).model_dump_json()) == []
    assert reader.read(True, frame) == []  # the client never sends internal frames


def test_a_turn_breakdown_in_internal_metrics_is_a_timeline_event_of_its_own():
    reader = by_name("realtime").timeline_reader()
    stages = {"decided": 0.5, "first_audio_sent": 0.8}
    frame = Metrics(voice_to_voice_s=0.8, stages_s=stages, response_done=True).model_dump_json()
    figures, breakdown = reader.read(False, frame)
    assert isinstance(figures, TurnFigures) and isinstance(breakdown, TurnStages)
    assert breakdown.stages == stages


# ---- streaming


def test_streaming_records_only_the_new_part_of_each_prefill():
    reader = by_name("streaming").timeline_reader()
    clip = pcm16_to_b64(np.full(1600, 0.1, np.float32))
    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
    ]
    spoken = {"role": "user", "content": [{"type": "audio", "data": clip, "sample_rate": 8000}]}
    first = frames(reader, (True, {"type": "prefill", "messages": [*history, spoken], "record": True}))
    assert kinds(first) == ["RecordChoice", "TurnStart", "Audio", "TurnEnd"]
    audio = first[2]
    assert (audio.role, audio.encoding, audio.sample_rate, audio.clip) == ("user", "pcm16", 8000, True)
    assert len(audio.data) == 3200
    # the next prefill repeats everything: only the new message is a turn
    typed = {
        "role": "user",
        "content": [
            {"type": "text", "text": "and now?"},
            {"type": "image", "data": base64.b64encode(PNG).decode()},
        ],
    }
    again = [*history, spoken, {"role": "assistant", "content": "ok"}, typed]
    second = frames(reader, (True, {"type": "prefill", "messages": again}))
    assert kinds(second) == ["TurnStart", "Text", "Image", "TurnEnd"]
    assert second[1] == Text("user", "and now?", final=True, source="typed") and second[2].kind == "image"


def test_streaming_reply_stop_and_done():
    reader = by_name("streaming").timeline_reader()
    speech = pcm16_to_b64(np.zeros(2400, np.float32))
    events = frames(
        reader,
        (
            False,
            {
                "type": "prefill_done",
                "prompt_length": 5,
                "message_count": 1,
                "cached_tokens": 3,
                "input_tokens": 2,
                "cache_hit": True,
                "transcript": "hello",
            },
        ),
        (
            False,
            {
                "type": "chunk",
                "chunk_index": 0,
                "text_delta": "Hi",
                "audio_data": speech,
                "audio_sample_rate": 24000,
            },
        ),
        (False, {"type": "chunk", "chunk_index": 1, "text_delta": " there"}),
        (True, {"type": "stop"}),
        (False, {"type": "done", "elapsed_ms": 120.0, "stopped": True, "text": "Hi there", "ttft_ms": 40.0}),
        (False, {"type": "error", "code": "worker_lost", "message": "gone"}),
    )
    assert kinds(events) == [
        "Text", "TurnFigures", "TurnStart", "Text", "Audio", "Text", "AssistantCutOff",
        "Text", "TurnFigures", "TurnEnd", "ErrorEvent",
    ]  # fmt: skip
    assert events[0] == Text("user", "hello", final=True, source="asr")
    assert events[1].next_turn and events[1].values["cache_hit"] is True
    assert events[8].values == {"ttft_s": 0.04, "elapsed_s": 0.12}
    assert events[9] == TurnEnd("assistant", status="stopped")
    assert events[10] == ErrorEvent("worker_lost", "gone")
    assert frames(reader, (True, {"type": "stop"})) == [Marker("stop")]  # nothing to cut


# ---- duplex


def test_duplex_user_audio_frames_and_the_assistants_turns():
    reader = by_name("duplex").timeline_reader()
    pcm = np.zeros(8000, np.float32)
    speech = pcm16_to_b64(np.zeros(24000, np.float32))
    unit = {
        "cost_prefill_ms": 10,
        "cost_generate_ms": 20,
        "cost_finalize_ms": 1,
        "wall_clock_ms": 35,
        "kv_cache_length": 1,
        "current_time": 1.0,
    }
    events = frames(
        reader,
        (True, {"type": "prepare", "config": {"sample_rate": 8000}, "record": False}),
        (
            True,
            {
                "type": "audio_chunk",
                "audio_base64": float32_to_b64(pcm),
                "frame_base64_list": [base64.b64encode(JPEG).decode()],
            },
        ),
        (True, {"type": "audio_chunk", "audio_base64": pcm16_to_b64(pcm), "format": "pcm16"}),
        (False, {"type": "result", "unit_index": 0, "is_listen": True, **unit}),
        (
            False,
            {
                "type": "result",
                "unit_index": 1,
                "is_listen": False,
                "text": "Hel",
                "audio_data": speech,
                **unit,
            },
        ),
        (
            False,
            {
                "type": "result",
                "unit_index": 2,
                "is_listen": False,
                "text": "lo",
                "end_of_turn": True,
                **unit,
            },
        ),
        (
            False,
            {
                "type": "result",
                "unit_index": 3,
                "is_listen": False,
                "text": "Again",
                "lagging": True,
                "merged_chunks": 2,
                **unit,
            },
        ),
        (False, {"type": "result", "unit_index": 4, "is_listen": True, "end_of_turn": True, **unit}),
        (True, {"type": "pause", "timeout": 5}),
        (False, {"type": "stopped", "session_id": "x", "units": 5}),
    )
    assert kinds(events) == [
        "RecordChoice", "Config", "Audio", "Image", "Audio",
        "TurnStart", "TurnFigures", "Text", "Audio", "Text", "TurnEnd",
        "Marker", "TurnStart", "TurnFigures", "Text", "AssistantCutOff", "TurnEnd", "Marker", "Marker",
    ]  # fmt: skip
    assert events[0] == RecordChoice(False) and isinstance(events[1], Config)
    user = events[2]
    assert (user.encoding, user.sample_rate, len(user.data)) == ("float32", 8000, 32000)
    assert events[4].encoding == "pcm16" and events[3] == Image(JPEG, "frame")
    assert events[6].values == {"unit_wall_clock_s": 0.035, "unit_prefill_s": 0.01, "unit_generate_s": 0.02}
    assert events[8] == Audio("assistant", base64.b64decode(speech), "pcm16", 24000)
    assert events[11] == Marker("lagging", {"merged_chunks": 2})
    assert events[15] == AssistantCutOff("yielded") and events[16] == TurnEnd(
        "assistant", status="interrupted"
    )
    assert events[17] == Marker("pause", {"timeout": 5})


# ---- realtime


def test_realtime_formats_come_from_what_the_worker_says_is_in_effect():
    reader = by_name("realtime").timeline_reader()
    ulaw = base64.b64encode(b"\xff" * 80).decode()
    default = frames(reader, (True, {"type": "input_audio_buffer.append", "audio": ulaw}))
    assert (default[0].encoding, default[0].sample_rate) == ("pcm16", 24000)
    # the client asks; only the worker's session.updated changes how audio is read
    ask = {"type": "session.update", "session": {"audio": {"input": {"format": {"type": "audio/pcmu"}}}}}
    assert frames(reader, (True, ask)) == []
    session = {
        "audio": {
            "input": {"format": {"type": "audio/pcmu", "rate": 8000}},
            "output": {"format": {"type": "audio/opus", "rate": 24000}},
        }
    }
    assert kinds(frames(reader, (False, {"type": "session.updated", "session": session}))) == ["Config"]
    heard = frames(reader, (True, {"type": "input_audio_buffer.append", "audio": ulaw}))
    assert (heard[0].encoding, heard[0].sample_rate) == ("pcmu", 8000) and heard[0].stream != default[
        0
    ].stream
    said = frames(
        reader, (False, {"type": "response.audio.delta", "response_id": "r1", "item_id": "i", "delta": ulaw})
    )
    assert (said[0].role, said[0].encoding, said[0].stream) == (
        "assistant",
        "ogg_opus",
        "r1",
    )  # beta name read


def test_realtime_turns_transcripts_barge_in_and_the_record_choice():
    reader = by_name("realtime").timeline_reader()
    events = frames(
        reader,
        (True, {"type": "session.update", "session": {"type": "realtime", "record": False}}),
        (False, {"type": "input_audio_buffer.speech_started", "audio_start_ms": 300, "item_id": "a"}),
        (
            False,
            {"type": "conversation.item.input_audio_transcription.delta", "item_id": "a", "delta": "hel"},
        ),
        (False, {"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 1800, "item_id": "a"}),
        (
            False,
            {
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": "a",
                "transcript": "hello",
            },
        ),
        (False, {"type": "response.created", "response": {"id": "r1"}}),
        (
            False,
            {
                "type": "response.output_audio_transcript.delta",
                "response_id": "r1",
                "item_id": "b",
                "delta": "You",
            },
        ),
        (
            False,
            {
                "type": "response.done",
                "response": {
                    "id": "r1",
                    "status": "cancelled",
                    "status_details": {"reason": "turn_detected"},
                },
            },
        ),
        (False, {"type": "conversation.item.truncated", "item_id": "b", "audio_end_ms": 640}),
        (
            True,
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "typed"},
                        {
                            "type": "input_image",
                            "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode(),
                        },
                    ],
                },
            },
        ),
        (
            False,
            {
                "type": "error",
                "error": {"type": "invalid_request_error", "code": "invalid_event", "message": "bad"},
            },
        ),
        (True, {"type": "response.cancel"}),
        (True, {"type": "omnivox.output_audio_buffer.report", "response_id": "r1", "state": "stopped"}),
    )
    assert events == [
        RecordChoice(False),
        TurnStart("user", audio_ms=300.0),
        Text("user", "hel", final=False, source="asr"),
        TurnEnd("user", audio_ms=1800.0),
        Text("user", "hello", final=True, source="asr"),
        TurnStart("assistant", ref="r1"),
        Text("assistant", "You", final=False),
        AssistantCutOff("turn_detected"),
        TurnEnd("assistant", status="cancelled"),
        Marker("truncated", {"item_id": "b", "audio_end_ms": 640}),
        TurnStart("user"),
        Text("user", "typed", final=True, source="typed"),
        Image(PNG, "image"),
        TurnEnd("user"),
        ErrorEvent("invalid_event", "bad"),
        Marker("response.cancel"),
        Marker("omnivox.output_audio_buffer.report", {"response_id": "r1", "state": "stopped"}),
    ]


def test_realtime_speech_over_the_reply_that_did_not_cut_it_is_marked_not_a_barge_in():
    reader = by_name("realtime").timeline_reader()
    paused = {
        "type": "omnivox.interruption.paused",
        "response_id": "r1",
        "item_id": "b",
        "audio_end_ms": 1200,
    }
    resumed = {
        "type": "omnivox.interruption.resumed",
        "response_id": "r1",
        "item_id": "b",
        "audio_start_ms": 1200,
        "reason": "no_words",
    }
    events = frames(
        reader,
        (False, paused),
        (False, resumed),
        (False, {"type": "response.done", "response": {"id": "r1", "status": "completed"}}),
    )
    assert events == [
        Marker("paused", {"response_id": "r1", "item_id": "b", "audio_end_ms": 1200}),
        Marker(
            "resumed", {"response_id": "r1", "item_id": "b", "audio_start_ms": 1200, "reason": "no_words"}
        ),
        TurnEnd("assistant", status="completed"),
    ]
