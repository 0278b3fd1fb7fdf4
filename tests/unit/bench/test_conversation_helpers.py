"""bench conversation: the speakerphone on tiny arrays, the tally's row, and the caller's pure
bookkeeping over its event log (who cancelled a reply, which pauses were the echo's)."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest

from omnivox.bench import conversation as conv
from omnivox.bench.conversation import COLUMNS, EVENTS, Tally, row
from omnivox.testing.speakerphone import Speakerphone

# ---- the speakerphone


def phone(rate: int = 1000, delay_ms: float = 3.0, gain_db: float = 0.0) -> Speakerphone:
    return Speakerphone(rate=rate, delay_ms=delay_ms, gain_db=gain_db)


def test_delay_is_in_samples_of_the_rate():
    assert phone(rate=24000, delay_ms=80).delay == 1920
    assert phone(rate=1000, delay_ms=3.9).delay == 3  # truncated, not rounded
    assert phone(delay_ms=0).delay == 0


def test_gain_is_decibels_as_amplitude():
    assert phone(gain_db=0).gain == pytest.approx(1.0)
    assert phone(gain_db=-20).gain == pytest.approx(0.1)
    assert phone(gain_db=-6).gain == pytest.approx(0.501, abs=1e-3)
    assert phone(gain_db=6).gain == pytest.approx(1.995, abs=1e-3)


def test_gain_at_or_below_minus_120_db_is_silence():
    assert phone(gain_db=-120).gain == 0.0
    assert phone(gain_db=-200).gain == 0.0
    assert phone(gain_db=-119).gain > 0.0


def test_an_idle_speaker_records_only_the_voice():
    p = phone()
    voice = np.array([0.1, -0.2, 0.3, 0.0], np.float32)
    out = p.record(voice)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, voice)
    assert not p.playing and p.queued == 0 and p.played == {}


def test_the_echo_comes_back_delay_samples_later():
    p = phone(delay_ms=3.0)
    p.play("r1", np.array([1, 2, 3, 4, 5], np.float32))
    first = p.record(np.zeros(4, np.float32))
    second = p.record(np.zeros(4, np.float32))
    np.testing.assert_allclose(first, [0, 0, 0, 1])
    np.testing.assert_allclose(second, [2, 3, 4, 5])
    assert p.played == {"r1": 5}
    assert not p.playing


def test_the_echo_is_attenuated_and_added_to_the_voice():
    p = phone(delay_ms=0.0, gain_db=-20.0)
    p.play("r", np.ones(3, np.float32))
    out = p.record(np.full(3, 0.5, np.float32))
    np.testing.assert_allclose(out, [0.6, 0.6, 0.6], rtol=1e-6)


def test_zero_delay_echoes_the_same_chunk():
    p = phone(delay_ms=0.0)
    p.play("r", np.array([0.25, 0.5], np.float32))
    np.testing.assert_allclose(p.record(np.zeros(3, np.float32)), [0.25, 0.5, 0.0])


def test_a_muted_speaker_still_plays_but_echoes_nothing():
    p = phone(delay_ms=0.0, gain_db=-150.0)
    p.play("r", np.ones(4, np.float32))
    out = p.record(np.zeros(4, np.float32))
    np.testing.assert_array_equal(out, np.zeros(4, np.float32))
    assert p.played == {"r": 4}


def test_replies_play_back_to_back_across_chunks():
    p = phone(delay_ms=0.0)
    p.play("a", np.array([1, 1, 1], np.float32))
    p.play("b", np.array([2, 2, 2], np.float32))
    assert p.queued == 6 and p.playing
    np.testing.assert_allclose(p.record(np.zeros(4, np.float32)), [1, 1, 1, 2])
    assert p.played == {"a": 3, "b": 1} and p.queued == 2
    np.testing.assert_allclose(p.record(np.zeros(4, np.float32)), [2, 2, 0, 0])
    assert p.played == {"a": 3, "b": 3} and p.queued == 0


def test_a_paused_speaker_plays_nothing_and_keeps_its_queue():
    p = phone(delay_ms=0.0)
    p.play("r", np.array([1, 2, 3, 4], np.float32))
    p.record(np.zeros(1, np.float32))
    p.paused = True
    assert not p.playing and p.queued == 3
    np.testing.assert_allclose(p.record(np.zeros(2, np.float32)), [0, 0])
    assert p.played == {"r": 1}
    p.paused = False
    assert p.playing
    np.testing.assert_allclose(p.record(np.zeros(3, np.float32)), [2, 3, 4])


def test_pausing_does_not_cut_the_echo_already_in_the_air():
    p = phone(delay_ms=2.0)
    p.play("r", np.array([5, 6], np.float32))
    np.testing.assert_allclose(p.record(np.zeros(2, np.float32)), [0, 0])
    p.paused = True
    np.testing.assert_allclose(p.record(np.zeros(3, np.float32)), [5, 6, 0])


def test_drop_removes_only_that_replys_unplayed_audio():
    p = phone(delay_ms=0.0)
    p.play("a", np.array([1, 1], np.float32))
    p.play("b", np.array([2, 2], np.float32))
    p.play("a", np.array([3], np.float32))
    p.drop("a")
    assert p.queued == 2
    np.testing.assert_allclose(p.record(np.zeros(3, np.float32)), [2, 2, 0])
    assert "a" not in p.played


def test_drop_of_a_half_played_reply_keeps_its_played_count():
    p = phone(delay_ms=0.0)
    p.play("a", np.arange(1, 6, dtype=np.float32))
    p.record(np.zeros(2, np.float32))
    p.drop("a")
    assert p.queued == 0 and p.played == {"a": 2}
    np.testing.assert_allclose(p.record(np.zeros(2, np.float32)), [0, 0])


def test_drop_of_an_unknown_reply_is_harmless():
    p = phone()
    p.play("a", np.ones(2, np.float32))
    p.drop("zzz")
    assert p.queued == 2


def test_play_converts_to_float32():
    p = phone(delay_ms=0.0)
    p.play("r", np.array([1, 2], np.float64))
    out = p.record(np.zeros(2, np.float64))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [1, 2])


def test_an_empty_chunk_records_nothing_and_keeps_the_history():
    p = phone(delay_ms=2.0)
    p.play("r", np.array([7, 8], np.float32))
    assert len(p.record(np.zeros(0, np.float32))) == 0
    np.testing.assert_allclose(p.record(np.zeros(4, np.float32)), [0, 0, 7, 8])


def test_a_long_recording_echoes_the_whole_reply_once():
    p = phone(delay_ms=5.0)
    reply = np.linspace(0.1, 1.0, 10).astype(np.float32)
    p.play("r", reply)
    out = np.concatenate([p.record(np.zeros(3, np.float32)) for _ in range(7)])
    np.testing.assert_allclose(out[5:15], reply, rtol=1e-6)
    assert not out[:5].any() and not out[15:].any()


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


def caller() -> conv.ConversationCaller:
    args = argparse.Namespace(delay_ms=80.0, gain_db=-10.0)
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
        {"turn": 1, "event": "noise", "status": None, "events": ["input_audio_buffer.speech_started"]}
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
