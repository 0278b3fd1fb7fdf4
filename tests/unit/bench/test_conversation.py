"""bench conversation: the tally's row, voiced extents, and the caller's log (``CallLog``): who
cancelled a reply, which pauses were the echo's."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math

import numpy as np
import pytest

from omnivox.bench import conversation as conv
from omnivox.bench.conversation import COLUMNS, EVENTS, Tally, row

# ---- the tally's row


def test_a_fresh_tally_counts_nothing_and_does_not_share_state():
    a, b = Tally(), Tally()
    assert a.false == {"echo": 0, "backchannel": 0, "noise": 0}
    assert a.tried == dict.fromkeys(EVENTS, 0)
    assert a.eot == {"right": 0, "early": 0, "late": 0}
    a.false["echo"] += 1
    a.tried["noise"] += 1
    a.reaction_s.append(1.0)
    a.errors.append("x")
    assert b.false["echo"] == 0 and b.tried["noise"] == 0 and b.reaction_s == [] and b.errors == []


def test_an_empty_tallys_row_has_a_cell_per_column_and_nan_percentiles():
    r = row("hibari", Tally())
    assert len(r) == len(COLUMNS)
    assert r[0] == "hibari"
    assert r[1] == "0/0 (0 paused)"
    assert r[4] == "0/0 (0 unheard)"
    assert all(math.isnan(r[i]) for i in (6, 7, 9, 10))
    assert r[8] == "0/0/0" and r[11] == 0


def test_a_tallys_row_shows_its_counts():
    t = Tally()
    t.replies = 10
    t.echo_pauses = 3
    t.false.update(echo=1, backchannel=2, noise=1)
    t.tried.update(echo=0, backchannel=4, noise=5, barge_in=3)
    t.noise_unheard = 2
    t.noise_resumed = 2
    t.missed = 1
    t.reaction_s = [0.1, 0.3]
    t.eot.update(right=7, early=2, late=1)
    t.v2v_s = [0.5, 0.7, 0.9]
    t.errors = ["a", "b"]
    r = row("espeak", t)
    assert r[1] == "1/10 (3 paused)"
    assert r[2] == "2/4"
    assert r[3] == "1/5"
    assert r[4] == "2/3 (2 unheard)"  # five bursts tried, two unheard: three paused
    assert r[5] == "1/3"
    assert r[6] == pytest.approx(200.0)
    assert r[7] == pytest.approx(290.0)
    assert r[8] == "7/2/1"
    assert r[9] == pytest.approx(700.0)
    assert r[10] == pytest.approx(880.0)
    assert r[11] == 2


def test_the_columns_name_each_false_event_but_barge_in():
    assert set(EVENTS) == {"echo", "backchannel", "noise", "barge_in"}
    for kind in ("echo", "backchannel", "noise"):
        assert f"false: {kind}" in COLUMNS


# ---- onsets and response ids


def test_onsets_of_silence_span_the_whole_clip():
    assert conv.onsets(np.zeros(10, np.float32)) == (0, 10)
    assert conv.onsets(np.zeros(0, np.float32)) == (0, 0)


def test_onsets_find_the_first_and_past_the_last_loud_sample():
    a = np.zeros(10, np.float32)
    a[3] = 0.5
    a[6] = -0.03
    assert conv.onsets(a) == (3, 7)


def test_onsets_ignore_samples_at_the_threshold():
    a = np.full(5, 0.02, np.float32)
    a[2] = 0.021
    assert conv.onsets(a) == (2, 3)


def test_rid_reads_the_response_id_or_the_responses_id():
    assert conv.response_id({"response_id": "r1"}) == "r1"
    assert conv.response_id({"response": {"id": "r2"}}) == "r2"
    assert conv.response_id({"response_id": "r1", "response": {"id": "r2"}}) == "r1"
    assert conv.response_id({}) is None
    assert conv.response_id({"response": None}) is None


# ---- the caller's log


def caller(line: str = "wide") -> conv.ConversationCaller:
    args = argparse.Namespace(delay_ms=80.0, gain_db=-10.0, noise="none", line=line)
    return conv.ConversationCaller("ws://nowhere/v1/realtime", None, None, args, offset=0)


def log(c: conv.ConversationCaller, kind: str, **event) -> None:
    c.log.add(float(len(c.log.events)), kind, {"type": kind, **event})


def started(c: conv.ConversationCaller, ms: int) -> None:
    log(c, "input_audio_buffer.speech_started", audio_start_ms=ms)


def done(c: conv.ConversationCaller, rid: str, status: str) -> None:
    log(c, "response.done", response={"id": rid, "status": status})


def test_the_caller_has_a_speakerphone_from_its_arguments():
    c = caller()
    assert c.phone.rate == conv.RATE
    assert c.phone.delay == conv.RATE * 80 // 1000
    assert c.phone.gain == pytest.approx(10 ** (-0.5))
    assert isinstance(c.tally, Tally)


def test_speech_before_with_no_speech_is_the_echo():
    c = caller()
    log(c, "response.created", response={"id": "r"})
    assert c.log.speech_before(1) == "echo"


def test_speech_that_began_while_the_caller_spoke_is_the_callers():
    c = caller()
    c.log.said = [[conv.RATE, 2 * conv.RATE]]  # the caller spoke from 1 s to 2 s
    started(c, 1200)
    assert c.log.speech_before(1) == "caller"


def test_speech_that_began_in_silence_is_the_echo():
    c = caller()
    c.log.said = [[conv.RATE, 2 * conv.RATE]]
    started(c, 3000)
    assert c.log.speech_before(1) == "echo"


def test_speech_padded_before_the_callers_voice_is_still_the_callers():
    c = caller()
    c.log.said = [[conv.RATE, 2 * conv.RATE]]
    started(c, 700)  # prefix padding: the window reaches 0.5 s past the reported start
    assert c.log.speech_before(1) == "caller"
    c.log.events.clear()
    started(c, 500)  # the window ends exactly where the voice begins: no overlap
    assert c.log.speech_before(1) == "echo"


def test_speech_before_looks_only_at_the_last_start_before_the_index():
    c = caller()
    c.log.said = [[0, conv.RATE // 10]]
    started(c, 0)  # the caller's
    started(c, 5000)  # the echo's
    started(c, 0)
    assert c.log.speech_before(2) == "echo"
    assert c.log.speech_before(1) == "caller"
    assert c.log.speech_before(3) == "caller"


def test_cause_of_a_completed_or_unknown_reply_is_none():
    c = caller()
    done(c, "r1", "completed")
    assert c.log.cause("r1") is None
    assert c.log.cause("r2") is None
    assert not c.log.cancelled("r1") and not c.log.cancelled("r2")


def test_cause_of_a_cancelled_reply_is_the_speech_before_its_done():
    c = caller()
    c.log.said = [[0, conv.RATE]]
    started(c, 100)
    done(c, "r1", "cancelled")
    started(c, 9000)
    done(c, "r2", "cancelled")
    assert c.log.cancelled("r1") and c.log.cancelled("r2")
    assert c.log.cause("r1") == "caller"
    assert c.log.cause("r2") == "echo"


def test_a_completed_reply_truncated_after_it_sent_everything_was_cut_by_the_speech_before():
    c = caller()
    c.log.said = [[0, conv.RATE]]
    log(c, "response.output_item.added", response_id="r1", item={"id": "i1"})
    log(c, "response.output_item.added", response_id="r2", item={"id": "i2"})
    done(c, "r1", "completed")
    done(c, "r2", "completed")
    started(c, 100)
    log(c, "conversation.item.truncated", item_id="i1", audio_end_ms=1200)
    assert c.log.cut("r1") == c.log.events[-1] and c.log.cancelled("r1")
    assert c.log.cause("r1") == "caller"
    assert c.log.cut("r2") is None and c.log.cause("r2") is None  # another item's truncation


def test_interjecting_as_the_reply_plays_out_waits_for_its_last_audio_and_little_left() -> None:
    args = argparse.Namespace(delay_ms=0.0, gain_db=-10.0, noise="none", line="wide")
    c = conv.ConversationCaller("ws://nowhere/v1/realtime", None, None, args, offset=0)
    c.phone.play("r", np.zeros(conv.RATE, np.float32))  # a second of it queued

    async def interjected() -> bool:
        waiting = asyncio.create_task(c._left("r", 0.4))
        for _ in range(3):
            await asyncio.sleep(0)
            c._wake.set()
        await asyncio.sleep(0)
        done = waiting.done()
        waiting.cancel()
        return done

    async def script() -> list[bool]:
        still_sending = await interjected()  # it may say more
        log(c, "response.done", response={"id": "r", "status": "completed"})
        second_left = await interjected()
        c.phone.record(np.zeros(int(0.7 * conv.RATE), np.float32))
        return [still_sending, second_left, await interjected()]  # 300 ms left

    assert asyncio.run(script()) == [False, False, True]


def test_the_player_drops_a_truncated_replys_unplayed_audio_and_plays_on() -> None:
    c = caller()
    frames = [
        {"type": "response.output_item.added", "response_id": "r1", "item": {"id": "i1"}},
        {"type": "response.output_audio.delta", "response_id": "r1", "delta": "AAAAAA=="},
        {"type": "response.done", "response": {"id": "r1", "status": "completed"}},
        {"type": "omnivox.interruption.paused", "response_id": "r1", "item_id": "i1", "audio_end_ms": 0},
    ]

    async def feed(events: list[dict]) -> None:
        async def frames_of():
            for e in events:
                yield json.dumps(e)

        await c.read_events(frames_of())

    asyncio.run(feed(frames))
    assert c.phone.holds("r1") and c.phone.paused
    asyncio.run(feed([{"type": "conversation.item.truncated", "item_id": "i1", "audio_end_ms": 0}]))
    assert not c.phone.holds("r1") and not c.phone.paused


def test_first_filters_by_kind_mark_and_response():
    c = caller()
    log(c, "response.output_audio.delta", response_id="a")
    log(c, "response.output_audio.delta", response_id="b")
    log(c, "response.output_audio.delta", response_id="a")
    assert c.log.first("response.output_audio.delta", 0)[2]["response_id"] == "a"
    assert c.log.first("response.output_audio.delta", 0, "b")[0] == 1.0
    assert c.log.first("response.output_audio.delta", 1, "a")[0] == 2.0
    assert c.log.first("response.output_audio.delta", 3) is None
    assert c.log.first("response.done", 0) is None


def test_count_counts_a_kind_over_the_whole_log():
    c = caller()
    for _ in range(3):
        log(c, "response.created", response={"id": "x"})
    done(c, "x", "completed")
    assert c.log.count("response.created") == 3
    assert c.log.count("response.done") == 1
    assert c.log.count("error") == 0


def test_settle_counts_a_reply_cancelled_by_its_echo_and_its_echo_pauses():
    c = caller()
    c.log.said = [[0, conv.RATE // 2]]
    log(c, "response.created", response={"id": "r"})  # 0
    started(c, 5000)  # 1: silence: the echo
    log(c, "omnivox.interruption.paused", response_id="r")  # 2
    log(c, "omnivox.interruption.resumed", response_id="r")  # 3
    started(c, 6000)  # 4
    log(c, "omnivox.interruption.paused", response_id="other")  # 5: another reply's: not counted
    done(c, "r", "cancelled")  # 6
    c.log.settle(c.tally, turn=2, event="echo", rid="r", mark=0)
    assert c.tally.false["echo"] == 1
    assert c.tally.echo_pauses == 1
    (trace,) = c.tally.trace
    assert trace["turn"] == 2 and trace["event"] == "echo" and trace["status"] == "cancelled"
    assert trace["events"] == [
        "input_audio_buffer.speech_started",
        "omnivox.interruption.paused",
        "omnivox.interruption.resumed",
        "input_audio_buffer.speech_started",
        "omnivox.interruption.paused",
    ]


def test_settle_does_not_blame_the_echo_for_the_callers_barge_in():
    c = caller()
    c.log.said = [[0, 2 * conv.RATE]]
    started(c, 500)
    log(c, "omnivox.interruption.paused", response_id="r")
    done(c, "r", "cancelled")
    c.log.settle(c.tally, turn=0, event="barge_in", rid="r", mark=0)
    assert c.tally.false["echo"] == 0 and c.tally.echo_pauses == 0
    assert c.tally.trace[0]["status"] == "cancelled"


def test_settle_of_a_reply_without_done_traces_no_status():
    c = caller()
    started(c, 0)
    c.log.settle(c.tally, turn=1, event="noise", rid="missing", mark=0)
    assert c.tally.false["echo"] == 0
    assert c.tally.trace == [
        {
            "turn": 1,
            "event": "noise",
            "status": None,
            "events": ["input_audio_buffer.speech_started"],
            "judged": [],
            "said": "",
        }
    ]


def test_settle_only_reads_the_log_from_its_mark():
    c = caller()
    log(c, "omnivox.interruption.paused", response_id="r")  # before the mark
    log(c, "response.created", response={"id": "r"})
    done(c, "r", "completed")
    c.log.settle(c.tally, turn=0, event="echo", rid="r", mark=1)
    assert c.tally.echo_pauses == 0
    assert c.tally.trace[0]["events"] == []
    assert c.tally.trace[0]["status"] == "completed"


def test_settle_counts_each_judgement_by_what_the_caller_did() -> None:
    c = caller()
    tally = conv.Tally()
    log(c, "omnivox.interruption.judged", verdict="words", action="wait", text="Really?", evidence={})
    log(c, "omnivox.interruption.judged", verdict="unclear", action="resume", text="I'm...", evidence={})
    log(c, "omnivox.interruption.judged", verdict="words", action="cut", text="Wait, stop.", evidence={})
    c.log.settle(tally, 0, "backchannel", "resp_1", 0)
    assert tally.verdicts["backchannel"] == {"waited": 1, "unclear": 1, "words": 1}
    assert tally.trace[0]["judged"][1][:2] == ("unclear", "I'm...")
    assert "unclear 1,waited 1,words 1" in conv.row("hibari", tally)[-1]


def test_a_telephone_caller_speaks_and_hears_g711_at_8_khz() -> None:
    c = caller("g711")
    tone = (0.3 * np.sin(2 * np.pi * 300 * np.arange(conv.RATE) / conv.RATE)).astype(np.float32)
    sent = [c._encode(tone[i : i + 960]) for i in range(0, len(tone), 960)]
    codes = b"".join(base64.b64decode(s) for s in sent)
    assert 7700 <= len(codes) <= 8000  # a second at 8 kHz, a byte a sample (less the filter's delay)
    heard = np.concatenate(
        [c._decode(base64.b64encode(codes[i : i + 320]).decode()) for i in range(0, len(codes), 320)]
    )
    # (the resamplers hold back their filters' delay until more audio comes)
    assert len(heard) >= 0.9 * conv.RATE and 0.15 < np.sqrt(np.mean(heard[4000:20000] ** 2)) < 0.25
