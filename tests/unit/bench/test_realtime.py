"""bench realtime without a cluster: the session it asks for, the real-time factors it reads from the
gateway's metrics, its table rows, and what a caller makes of the events it hears."""

from __future__ import annotations

import argparse
import base64
import json
import time

import numpy as np
import pytest

from omnivox.bench import realtime as bench
from omnivox.bench.paced_caller import LOUD
from omnivox.gateway.metrics import GatewayMetrics


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser.parse_args(list(argv))


# ---- arguments and the session


def test_defaults():
    args = parse()
    assert args.users == [1, 4, 8, 16] and args.turns == 3 and args.silence_ms == 500
    assert args.chunk_ms == 40 and args.workers is None and args.llm == "local" and args.asr == "whisper"
    assert args.detection == ["server_vad"] and args.transport == ["websocket"] and args.record == ["off"]


def test_an_unknown_transport_is_refused():
    with pytest.raises(SystemExit):
        parse("--transport", "carrier-pigeon")


def test_server_vad_session_carries_the_silence():
    args = parse("--silence-ms", "700")
    args.mode = "server_vad"
    assert bench.session_config(args) == {
        "type": "realtime",
        "audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 700}}},
    }


@pytest.mark.parametrize("eagerness", ["low", "medium", "high", "auto"])
def test_any_other_mode_is_a_semantic_vad_eagerness(eagerness):
    args = parse()
    args.mode = eagerness
    vad = bench.session_config(args)["audio"]["input"]["turn_detection"]
    assert vad == {"type": "semantic_vad", "eagerness": eagerness}


def test_the_session_config_is_one_the_protocol_accepts():
    from omnivox.protocol.realtime.session_config import SessionConfig

    for mode in ("server_vad", "high"):
        args = parse()
        args.mode = mode
        session = bench.session_config(args)
        config = SessionConfig.model_validate(session)
        assert config.audio.input.turn_detection is not None


def test_env_picks_the_llm_and_asr():
    env = bench.cluster_env(parse("--llm", "echo", "--asr", "pocketsphinx"))
    assert env["OMNIVOX_LLM"] == "echo" and env["OMNIVOX_ASR"] == "pocketsphinx"
    assert "OMNIVOX_LLM_URL" not in env
    assert env["OMNIVOX_HEALTH_INTERVAL_S"] == "2" and env["OMNIVOX_HEARTBEAT_INTERVAL_S"] == "2"


def test_an_llm_url_means_the_openai_backend_whatever_llm_says():
    env = bench.cluster_env(parse("--llm", "echo", "--llm-url", "http://llm:8000/v1"))
    assert env["OMNIVOX_LLM"] == "openai" and env["OMNIVOX_LLM_URL"] == "http://llm:8000/v1"


def test_env_does_not_change_the_production_intervals_table():
    before = dict(bench.PRODUCTION_INTERVALS)
    bench.cluster_env(parse())
    assert bench.PRODUCTION_INTERVALS == before


def test_describe():
    assert bench.describe(parse()) == "local LLM, whisper ASR, in-process workers"
    assert bench.describe(parse("--llm-url", "http://x/v1", "--asr", "pocketsphinx")) == (
        "LLM http://x/v1, pocketsphinx ASR, in-process workers"
    )
    assert bench.describe(parse("--pipeline", "cascade")).endswith(", pipeline cascade")


def test_seats_are_said_and_refused_for_in_process_workers():
    assert bench.describe(parse("--pipeline", "cascade", "--seats", "4")).endswith(
        ", pipeline cascade, 4 seats per worker process"
    )
    with pytest.raises(SystemExit, match="--seats 4 needs an engine"):  # before any server starts
        bench.run(parse("--seats", "4"))


def test_describe_takes_the_options_of_bench_conversation_too():
    """bench conversation describes its models with this and has no --pipeline (it crashed at the end)."""
    import argparse

    from omnivox.bench import conversation

    parser = argparse.ArgumentParser()
    conversation.add_arguments(parser)
    assert bench.describe(parser.parse_args([])) == "local LLM, whisper ASR, in-process workers"


# ---- real-time factors from /metrics


def test_rtf_from_a_real_metrics_page():
    m = GatewayMetrics()
    m.voice_busy.labels("asr").inc(3.0)
    m.voice_audio.labels("asr").inc(12.0)
    m.voice_busy.labels("tts").inc(1.5)
    m.voice_audio.labels("tts").inc(10.0)
    assert bench.real_time_factors(m.render().decode()) == {"asr": 0.25, "tts": 0.15}


def test_rtf_leaves_out_a_part_without_audio():
    m = GatewayMetrics()
    m.voice_busy.labels("asr").inc(2.0)
    m.voice_audio.labels("asr").inc(4.0)
    m.voice_busy.labels("tts").inc(1.0)  # busy, but no audio counted: no factor
    assert bench.real_time_factors(m.render().decode()) == {"asr": 0.5}


def test_rtf_of_a_page_without_voice_counters_is_empty():
    assert bench.real_time_factors(GatewayMetrics().render().decode()) == {}
    assert bench.real_time_factors("") == {}


def test_rtf_of_audio_without_busy_time_is_zero():
    text = 'omnivox_voice_audio_seconds_total{part="tts"} 8.0\n'
    assert bench.real_time_factors(text) == {"tts": 0.0}


def test_rtf_reads_scientific_notation():
    text = (
        'omnivox_voice_busy_seconds_total{part="asr"} 1.5e+01\n'
        'omnivox_voice_audio_seconds_total{part="asr"} 3e+01\n'
    )
    assert bench.real_time_factors(text) == {"asr": 0.5}


# ---- rows


def result(**over):
    r = {
        "turns": 6,
        "v2v_p50_ms": 700.0,
        "v2v_p95_ms": 900.0,
        "heard_p50_ms": 800.0,
        "heard_p95_ms": 1000.0,
        "asr_rtf": 0.2,
        "tts_rtf": 0.3,
        "gateway_cpu_pct": 1.5,
        "worker_rss_mb": 400.0,
        "mb_per_session": 450.0,
        "errors": ["timeout", "timeout"],
        "real_time": False,
    }
    r.update(over)
    return r


def test_a_row_has_a_cell_per_column():
    row = bench.table_row("websocket", "server_vad", 4, "off", result())
    assert len(row) == len(bench.COLUMNS)
    cells = dict(zip(bench.COLUMNS, row, strict=True))
    assert cells["transport"] == "websocket" and cells["callers"] == 4 and cells["record"] == "off"
    assert cells["errors"] == 2 and cells["real time"] == "no" and cells["rec MB/min"] == "-"
    assert cells["v2v p95 ms"] == 900.0 and cells["TTS RTF"] == 0.3
    assert cells["MB/session"] == 450.0 and cells["ASR batch"] == "-"  # in-process: no batches


def test_a_pipeline_run_shows_its_asr_batch_occupancy():
    cells = dict(
        zip(
            bench.COLUMNS,
            bench.table_row("websocket", "server_vad", 8, "off", result(asr_batch="1.2 (4)")),
            strict=True,
        )
    )
    assert cells["ASR batch"] == "1.2 (4)"


def test_a_recorded_run_shows_its_megabytes_per_minute():
    r = result(real_time=True, errors=[], recorded={"mb_per_min": 2.5})
    cells = dict(zip(bench.COLUMNS, bench.table_row("webrtc", "high", 1, "on", r), strict=True))
    assert cells["rec MB/min"] == 2.5 and cells["real time"] == "yes" and cells["errors"] == 0


def test_a_run_whose_recording_read_nothing_shows_a_dash():
    cells = dict(
        zip(bench.COLUMNS, bench.table_row("websocket", "low", 1, "on", result(recorded=None)), strict=True)
    )
    assert cells["rec MB/min"] == "-"


# ---- odds and ends


def test_caller_stats_start_empty_and_do_not_share_lists():
    a, b = bench.RealtimeCallerStats(), bench.RealtimeCallerStats()
    a.v2v_s.append(1.0)
    assert b.v2v_s == [] and b.heard_s == [] and b.errors == []


# ---- a caller hearing a reply


class Replay:
    """A server connection that plays back scripted events."""

    def __init__(self, events: list[dict]) -> None:
        self._raw = [json.dumps(e) for e in events]

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        if not self._raw:
            raise StopAsyncIteration
        return self._raw.pop(0)


def delta(samples: np.ndarray, beta: bool = False) -> dict:
    kind = "response.audio.delta" if beta else "response.output_audio.delta"
    return {"type": kind, "delta": base64.b64encode(samples.astype("<i2").tobytes()).decode()}


def caller() -> bench.RealtimeCaller:
    args = parse()
    args.mode = "server_vad"
    return bench.RealtimeCaller("ws://nowhere/v1/realtime", [], args)


@pytest.mark.parametrize("beta", [False, True])
async def test_a_caller_times_the_first_delta_and_the_first_sound_after_it(beta):
    c = caller()
    c.timer.expect_reply(time.monotonic() - 100.0)  # the user stopped speaking long ago
    quiet = np.zeros(2400, np.int16)  # 0.1 s of silence before the first word
    loud = np.zeros(2400, np.int16)
    loud[240:] = 5000  # sound 10 ms into the second delta
    events = [
        {"type": "response.created", "response": {}},
        delta(quiet, beta),
        delta(loud, beta),
        {"type": "response.done", "response": {"status": "completed"}},
    ]
    await c.read_events(Replay(events))
    assert len(c.stats.v2v_s) == 1 and c.stats.v2v_s[0] >= 100.0
    (heard,) = c.stats.heard_s
    assert heard - c.stats.v2v_s[0] == pytest.approx(0.11)  # played in real time from the first delta
    assert c.stats.errors == [] and c.timer.reply_done.is_set() and c.timer.speech_end is None
    assert c.timer.playing_until > 0


async def test_a_cut_reply_and_server_errors_are_counted_as_errors():
    c = caller()
    events = [
        {"type": "response.created", "response": {}},
        {"type": "error", "error": {"code": "invalid_event", "message": "x"}},
        {"type": "error", "error": {"message": "no code"}},
        {"type": "response.done", "response": {"status": "cancelled"}},
    ]
    await c.read_events(Replay(events))
    assert c.stats.errors == ["invalid_event", "error", "response cancelled"]
    assert c.stats.v2v_s == [] and c.stats.heard_s == []  # no turn was being timed
    assert c.timer.reply_done.is_set()


async def test_a_reply_that_is_all_silence_is_never_heard():
    c = caller()
    c.timer.expect_reply(time.monotonic())
    events = [
        {"type": "response.created", "response": {}},
        delta(np.zeros(480, np.int16)),
        delta(np.full(480, LOUD, np.int16)),  # exactly LOUD is still silence
        {"type": "response.done", "response": {"status": "completed"}},
    ]
    await c.read_events(Replay(events))
    assert len(c.stats.v2v_s) == 1 and c.stats.heard_s == []


async def test_only_the_first_reply_after_speech_is_timed():
    c = caller()
    c.timer.expect_reply(time.monotonic())
    loud = np.full(480, 4000, np.int16)
    reply = [{"type": "response.created", "response": {}}, delta(loud)]
    done = {"type": "response.done", "response": {"status": "completed"}}
    await c.read_events(Replay([*reply, done, *reply, done]))  # a second reply with no speech before it
    assert len(c.stats.v2v_s) == 1 and len(c.stats.heard_s) == 1


async def test_a_caller_pairs_each_reply_breakdown_with_the_voice_to_voice_it_measured():
    c = caller()
    c.timer.expect_reply(time.monotonic() - 1.0)
    first = delta(np.full(480, 4000, np.int16))
    first["response_id"] = "resp_1"
    stages = {"decided": 520.0, "transcribed": 600.0, "first_audio_sent": 900.0}
    events = [
        {"type": "response.created", "response": {}},
        first,
        {"type": "response.done", "response": {"status": "completed"}},
        {"type": "omnivox.turn.breakdown", "response_id": "resp_1", "stages_ms": stages},
        {"type": "omnivox.turn.breakdown", "response_id": "resp_other", "stages_ms": stages},  # not timed
    ]
    await c.read_events(Replay(events))
    (marks,) = c.stats.turn_marks
    assert marks["to_caller"] == pytest.approx(c.stats.v2v_s[0] * 1000)
    assert {k: marks[k] for k in stages} == stages


def test_the_breakdown_table_has_the_floor_option():
    assert parse().floor is False and parse("--floor").floor is True


@pytest.mark.parametrize(
    ("mode", "silence_ms", "wait_s"),
    [
        ("server_vad", 500, 0.5),
        ("server_vad", 0, 0.0),
        ("low", 500, 1.2),
        ("high", 500, 0.32),
        ("auto", 9, 0.64),
    ],
)
def test_a_turns_wait_is_the_silence_or_the_eagerness_finished_pause(mode, silence_ms, wait_s):
    assert bench.turn_wait_s(mode, silence_ms) == pytest.approx(wait_s)


def test_a_turn_wait_of_an_unknown_eagerness_is_refused():
    with pytest.raises(ValueError, match="eagerness must be one of"):
        bench.turn_wait_s("eager", 500)


def test_real_time_factors_skip_a_part_with_no_audio_and_read_exponents():
    text = (
        'omnivox_voice_busy_seconds_total{part="asr"} 1.5e-01\n'
        'omnivox_voice_audio_seconds_total{part="asr"} 3.0\n'
        'omnivox_voice_busy_seconds_total{part="tts"} 2.0\n'
        'omnivox_voice_audio_seconds_total{part="tts"} 0.0\n'
    )
    assert bench.real_time_factors(text) == {"asr": pytest.approx(0.05)}


def test_the_cpu_table_has_a_column_per_component_and_the_asr_split(capsys):
    results = {
        "websocket/server_vad/8": {
            "cpu_pct_per_session": {"gateway": 1.0, "workers": 7.0, "stage asr": 1.5},
            "asr_split": {"final_decode_s": 2.5, "finals": 6.0, "partial_decode_s": 1.0, "partials": 4.0},
        },
        "websocket/server_vad/1": {"cpu_pct_per_session": {"gateway": 2.0, "workers": 6.0}, "asr_split": {}},
    }
    bench.print_cpu(results)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert [c.strip() for c in lines[0].strip("|").split("|")] == [
        "run",
        "gateway",
        "workers",
        "stage asr",
        "total",
        "ASR finals + partials",
    ]
    first = [c.strip() for c in lines[2].strip("|").split("|")]
    assert first[4] == "9.500" and first[5] == "2.5 s / 6 + 1.0 s / 4"
    second = [c.strip() for c in lines[3].strip("|").split("|")]
    assert second[3] == "nan" and second[4] == "8.000" and second[5] == "-"
