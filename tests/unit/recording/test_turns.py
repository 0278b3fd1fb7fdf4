"""Turns from the journal: extents, text, barge-ins, figures and reply latencies."""

from __future__ import annotations

import pytest

from omnivox.recording.turns import build_turns, heard_ends


def audio(role, start, duration, seq, t=None, **extra):
    return {
        "type": "audio",
        "role": role,
        "start": start,
        "duration": duration,
        "seq": seq,
        "t": t or start,
        **extra,
    }


def test_a_barge_in_cuts_only_the_chunks_placed_before_it():
    events = [
        audio("assistant", 1.0, 1.0, 1),
        audio("assistant", 2.0, 1.0, 2),
        {"type": "barge_in", "t": 1.5, "cut_seq": 2},
        audio("assistant", 1.6, 1.0, 3),  # the next reply, placed inside the cut-off span
    ]
    heard_ends(events)
    assert [e["end"] for e in events if e["type"] == "audio"] == [1.5, 2.0, 2.6]


def test_audio_queued_wholly_past_a_barge_in_does_not_lengthen_the_reply():
    events = [
        {"type": "turn_start", "role": "assistant", "t": 1.0, "ref": "r1"},
        audio("assistant", 1.0, 0.5, 1),
        audio("assistant", 1.5, 0.2, 2),  # sent ahead of playback: placed after the cut
        {"type": "barge_in", "t": 1.4, "cut_seq": 2},
        {"type": "turn_end", "role": "assistant", "t": 1.4, "status": "cancelled"},
    ]
    heard_ends(events)
    (reply,) = build_turns(events)
    assert (reply["start"], reply["end"]) == (1.0, 1.4)


def test_realtime_turns_are_mapped_from_stream_positions_and_snap_to_the_speech():
    events = [
        audio("user", 0.2, 1.0, 1, stream_pos=0.0, voiced=[[0.2, 0.5]]),
        audio("user", 3.0, 1.0, 2, stream_pos=1.0, voiced=[[0.1, 0.8]]),  # after a pause in the stream
        {"type": "turn_start", "role": "user", "t": 3.5, "audio_ms": 800.0},  # padded back across the pause
        {"type": "text", "role": "user", "t": 3.6, "text": "hel", "final": False},
        {"type": "turn_end", "role": "user", "t": 3.9, "audio_ms": 1800.0},
        {"type": "text", "role": "user", "t": 4.0, "text": "hello", "final": True},
        {"type": "turn_start", "role": "assistant", "t": 4.1, "ref": "r1"},
        {"type": "text", "role": "assistant", "t": 4.1, "text": "Hi", "final": False},
        audio("assistant", 4.3, 2.0, 1),
        audio("assistant", 6.3, 0.1, 2, t=4.9),  # sent ahead, queued to play after the cut
        {"type": "barge_in", "t": 5.0, "cut_seq": 2},
        {"type": "turn_end", "role": "assistant", "t": 5.0, "status": "cancelled"},
        {"type": "figures", "t": 5.1, "values": {"voice_to_voice_s": 0.5}, "next_turn": False},
        {"type": "stages", "t": 5.1, "stages": {"decided": 0.3, "first_audio_sent": 0.5}},
    ]
    heard_ends(events)
    user, reply = build_turns(events)
    # 800 ms falls in the first stretch (0.2 + 0.8 = 1.0), but the speech starts at 3.0 + 0.1
    assert (user["start"], user["end"], user["text"]) == (3.1, 3.8, "hello")
    assert reply["start"] == 4.3 and reply["end"] == 5.0  # heard until the barge-in, not its queue
    assert reply["interrupted"] and reply["status"] == "cancelled" and reply["text"] == "Hi"
    assert reply["figures"] == {"voice_to_voice_s": 0.5} and reply["latency_s"] == pytest.approx(0.5)
    assert reply["stages"] == {"decided": 0.3, "first_audio_sent": 0.5} and "stages" not in user
    assert [t["index"] for t in (user, reply)] == [0, 1]


def test_without_user_turns_from_the_protocol_the_loud_stretches_are_the_turns():
    events = [
        audio("user", 0.0, 1.0, 1, stream_pos=0.0, voiced=[[0.5, 0.9]]),
        audio("user", 1.0, 1.0, 2, stream_pos=1.0, voiced=[[0.0, 0.4], [0.95, 1.0]]),  # short gap: one turn
        audio("user", 2.0, 1.0, 3, stream_pos=2.0, voiced=[[0.95, 1.0]]),  # too short alone... joined
        audio("user", 5.0, 1.0, 4, stream_pos=3.0, voiced=[[0.2, 0.25]]),  # a click: no turn
        {"type": "turn_start", "role": "assistant", "t": 3.4},
        audio("assistant", 3.5, 1.0, 1),
        {"type": "turn_end", "role": "assistant", "t": 4.5},
    ]
    heard_ends(events)
    turns = build_turns(events)
    assert [(t["role"], t["start"], t["end"]) for t in turns] == [("user", 0.5, 2.0), ("assistant", 3.5, 4.5)]
    assert turns[1]["latency_s"] == 1.5


def test_streaming_turns_and_figures_about_the_next_reply():
    events = [
        {"type": "turn_start", "role": "user", "t": 2.0},
        audio("user", 0.5, 1.5, 1),
        {"type": "turn_end", "role": "user", "t": 2.0},
        {"type": "text", "role": "user", "t": 2.3, "text": "hello there", "final": True},
        {"type": "figures", "t": 2.3, "values": {"cache_hit": False}, "next_turn": True},
        {"type": "turn_start", "role": "assistant", "t": 2.4},
        {"type": "text", "role": "assistant", "t": 2.4, "text": "Hi", "final": False},
        {"type": "text", "role": "assistant", "t": 2.5, "text": "Hi!", "final": True},
        {"type": "figures", "t": 2.5, "values": {"ttft_s": 0.1}, "next_turn": False},
        {"type": "turn_end", "role": "assistant", "t": 2.6, "status": "completed"},
        {"type": "turn_start", "role": "user", "t": 9.0},
        {"type": "text", "role": "user", "t": 9.0, "text": "typed", "final": True},
    ]
    heard_ends(events)
    first, reply, second = build_turns(events)
    assert (first["start"], first["end"], first["text"]) == (0.5, 2.0, "hello there")
    assert (reply["start"], reply["end"], reply["text"]) == (2.4, 2.6, "Hi!")
    assert reply["figures"] == {"cache_hit": False, "ttft_s": 0.1} and reply["latency_s"] == 0.4
    assert (second["start"], second["status"]) == (9.0, "unfinished")  # the session ended in it
