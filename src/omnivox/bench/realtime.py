"""Realtime voice under load, in the spirit of Unmute's loadtest: N simulated callers at once.

Each caller connects to ``/v1/realtime``, keeps its "microphone" open (PCM16 24 kHz appends every
``--chunk-ms``, paced in real time, silence between turns) and speaks ``--turns`` sentences
synthesised by hibari, each after the previous reply has finished playing. For every turn it times
voice-to-voice latency as a caller hears it: from the moment the last speech sample was captured
(the chunk holding it is sent as soon as it is complete) to the arrival of the reply's first audio
("v2v", the first audio delta; over WebRTC the ``output_audio_buffer.started`` event, when the
call's track begins to play it) and to its first sound ("heard": the first sample that is not
silence reaching the caller's speaker, which also counts the quiet the TTS puts before a sentence
and, over WebRTC, Opus and the caller's jitter buffer).

With ``--transport webrtc`` the same callers call ``POST /v1/realtime/calls`` instead
(``bench.realtime_webrtc``: Opus tracks, the data channel); "gateway CPU" is the gateway process's
CPU per session over the run, which for WebRTC holds Opus both ways, SRTP and the bridging.

The models are the embedded default (``--llm local``, ``--asr whisper``) unless told otherwise; turn
detection is ``server_vad`` and/or ``semantic_vad`` at the eagerness levels given (``--detection``).
"worker MB" is the resident memory of a worker process at the end of the run; "MB/session" all the
serving processes' memory (workers, and with ``--pipeline`` the coordinator and stages) per caller.

With ``--pipeline cascade`` the callers' workers are light session hosts sharing one set of stages
(batched Whisper slots, llama.cpp parallel slots, hibari), as ``omnivox serve --pipeline`` runs
them; "ASR batch" is the mean (and largest) number of transcripts per batched decode. ``--seats N``
runs the callers' light workers N to a process (``worker.seats``), as ``serve --seats N`` does.

The gateway's metrics give the real-time factors of hearing (VAD + ASR) and speaking (TTS) on the
workers under that load: busy time / audio time, summed over all sessions. Real time is held when
both stay under 1, no turn failed, and 95% of replies start within a second of the turn's end
(``silence_duration_ms``, or semantic_vad's pause for a finished sentence, + 1 s after the
speech): a machine past its capacity shows it there first, as queueing delay, long before the
factors reach 1.

Callers ask for omnivox's events, so each reply ends with its breakdown (``bench.breakdown``): a
second table gives each stage's p50 (ms after the end of the speech) and the caller's own v2v;
``--floor`` adds, per turn detection, each stage measured alone on the same clips, prompt and
sentence in this process after the load runs (``bench.floor``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import secrets
import statistics
import tempfile
import time
from collections.abc import AsyncIterable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import websockets
from websockets.asyncio.client import ClientConnection

from omnivox.audio.pcm import pcm16_to_b64
from omnivox.bench.breakdown import COLUMNS as BREAKDOWN_COLUMNS
from omnivox.bench.breakdown import median_marks, row, turn_marks
from omnivox.bench.paced_caller import (
    RATE,
    SENTENCES,
    CallerStats,
    Microphone,
    ReplyTimer,
    add_mic_noise_argument,
    add_pacing_argument,
    converse,
    mic_noise,
    pacing,
    speech_clip,
)
from omnivox.bench.realtime_pipeline import (
    add_pipeline_arguments,
    asr_batch,
    asr_split,
    component_pids,
    cpu_by_component,
    cpu_shares,
    pipeline_spec,
    stage_pids,
)
from omnivox.bench.realtime_webrtc import LOOPBACK_ENV, WebRtcCaller
from omnivox.bench.record_flag import add_record_argument, cpu_seconds, record_env, recorded, wait_finished
from omnivox.bench.table import percentile, print_table, rss_mb, write_json
from omnivox.protocol.realtime.events import ga_type
from omnivox.testing.cluster import cluster

SPREAD_S = 4.0
HEADROOM_S = 1.0  # a reply later than silence_duration_ms + this is not real time any more
# the workers' and gateway's housekeeping at production rates (the test cluster polls faster)
PRODUCTION_INTERVALS = {"OMNIVOX_HEALTH_INTERVAL_S": "2", "OMNIVOX_HEARTBEAT_INTERVAL_S": "2"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--users", type=int, nargs="+", default=[1, 4, 8, 16], help="concurrent callers")
    parser.add_argument("--turns", type=int, default=3, help="turns per caller")
    parser.add_argument("--silence-ms", type=int, default=500, help="server VAD silence_duration_ms")
    parser.add_argument("--chunk-ms", type=int, default=40, help="audio per append")
    parser.add_argument(
        "--workers", type=int, help="worker processes (default: one per caller, or per --seats callers)"
    )
    parser.add_argument(
        "--seats",
        type=int,
        default=1,
        help="sessions each worker process hosts, each a worker to the gateway (pipeline or echo engine)",
    )
    parser.add_argument("--llm", default="local", help="local (default: the embedded SmolLM2), echo")
    parser.add_argument("--llm-url", help="an OpenAI-compatible LLM server instead")
    parser.add_argument("--asr", default="whisper", help="whisper (default), pocketsphinx")
    parser.add_argument(
        "--detection",
        nargs="+",
        default=["server_vad"],
        help="turn detection: server_vad and/or semantic_vad eagerness levels (low, medium, high, auto)",
    )
    parser.add_argument(
        "--transport",
        nargs="+",
        default=["websocket"],
        choices=["websocket", "webrtc"],
        help="how callers call",
    )
    parser.add_argument("--log-dir", help="keep the server logs here")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also measure each stage of a turn alone (same clips, prompt and sentence) under the breakdown",
    )
    add_record_argument(parser)
    add_pipeline_arguments(parser)
    add_pacing_argument(parser)
    add_mic_noise_argument(parser)


RealtimeCallerStats = CallerStats  # the name the other benches and the tests know


class RealtimeCaller:
    """One simulated user on ``/v1/realtime``: a microphone that never stops, a speaker that plays
    the replies (``bench.paced_caller``)."""

    def __init__(self, url: str, clips: list[tuple[np.ndarray, float]], args: argparse.Namespace) -> None:
        self.url = url
        self.clips = clips
        self.args = args
        self.stats = RealtimeCallerStats()
        self.timer = ReplyTimer(self.stats, RATE)
        self.answered: dict[str, float] = {}  # response id -> its v2v, until its breakdown comes

    async def run(self, turns: int, offset_s: float) -> RealtimeCallerStats:
        await asyncio.sleep(offset_s)  # callers do not all start on the same frame
        try:
            async with websockets.connect(self.url, max_size=None, ping_interval=None) as ws:
                await ws.send(json.dumps({"type": "session.update", "session": self._session()}))
                reader = asyncio.create_task(self.read_events(ws))
                try:
                    await self._talk(ws, turns)
                finally:
                    reader.cancel()
        except (OSError, websockets.exceptions.WebSocketException) as exc:
            self.stats.errors.append(f"connection: {type(exc).__name__}")
        return self.stats

    def _session(self) -> dict:
        return session_config(self.args)

    async def _talk(self, ws: ClientConnection, turns: int) -> None:
        async def append(chunk: np.ndarray) -> None:
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": pcm16_to_b64(chunk)}))

        mic = Microphone(append, RATE, self.args.chunk_ms, getattr(self.args, "mic_noise_db", None))
        await converse(mic, self.timer, self.clips, turns, self.args.pause_s)

    async def read_events(self, ws: AsyncIterable[str | bytes]) -> None:
        """Read the server's events until the connection ends, feeding the replies' audio to the
        timer (``timer``: v2v and heard into ``stats``; when a reply has been heard)."""
        async for raw in ws:
            event = json.loads(raw)
            kind = ga_type(event["type"])
            if kind == "response.created":
                self.timer.reply_started()
            elif kind == "response.output_audio.delta":
                pcm = np.frombuffer(base64.b64decode(event["delta"]), "<i2")
                timed = len(self.stats.v2v_s)
                self.timer.audio(pcm, time.monotonic())
                if len(self.stats.v2v_s) > timed:  # this reply's first audio: its v2v, for its breakdown
                    self.answered[event.get("response_id", "")] = self.stats.v2v_s[-1]
            elif kind == "response.done":
                status = event["response"]["status"]
                if status != "completed":
                    self.stats.errors.append(f"response {status}")
                self.timer.reply_finished(time.monotonic())
            elif kind == "error":
                self.stats.errors.append(event["error"].get("code") or "error")
            elif kind == "omnivox.turn.breakdown" and (v2v := self.answered.pop(event["response_id"], None)):
                self.stats.turn_marks.append(turn_marks(v2v * 1000, event["stages_ms"]))


def session_config(args: argparse.Namespace) -> dict:
    if args.mode == "server_vad":
        vad: dict = {"type": "server_vad", "silence_duration_ms": args.silence_ms}
    else:
        vad = {"type": "semantic_vad", "eagerness": args.mode}
    return {"type": "realtime", "audio": {"input": {"turn_detection": vad}}}


def real_time_factors(metrics_text: str) -> dict[str, float]:
    """Real-time factors of hearing and speaking from the gateway's counters."""
    values: dict[str, float] = {}
    for name, part, value in re.findall(
        r'omnivox_voice_(busy|audio)_seconds_total\{part="(\w+)"\} (\S+)', metrics_text
    ):
        values[f"{name}_{part}"] = float(value)
    return {
        part: values.get(f"busy_{part}", 0.0) / values[f"audio_{part}"]
        for part in ("asr", "tts")
        if values.get(f"audio_{part}")
    }


async def _load(base: str, users: int, clips: list, args: argparse.Namespace) -> list[RealtimeCallerStats]:
    if args.transport_now == "webrtc":
        callers: list = [
            WebRtcCaller(base, clips, session_config(args), RealtimeCallerStats(), args.pause_s)
            for _ in range(users)
        ]
    else:
        url = base.replace("http://", "ws://") + "/v1/realtime?omnivox_events=true"  # (each turn's breakdown)
        callers = [RealtimeCaller(url, clips, args) for _ in range(users)]
    # callers start spread over one turn's length, so they are at different points of their calls
    return await asyncio.gather(*(c.run(args.turns, SPREAD_S * i / users) for i, c in enumerate(callers)))


def cluster_env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(PRODUCTION_INTERVALS)
    env["OMNIVOX_ASR"] = args.asr
    if args.llm_url:
        env["OMNIVOX_LLM_URL"] = args.llm_url
        env["OMNIVOX_LLM"] = "openai"
    else:
        env["OMNIVOX_LLM"] = args.llm
    return env


def describe(args: argparse.Namespace) -> str:
    llm = f"LLM {args.llm_url}" if args.llm_url else f"{args.llm} LLM"
    pipeline = getattr(args, "pipeline", None)  # (bench conversation has no --pipeline)
    where = f", pipeline {pipeline}" if pipeline else ", in-process workers"
    seats = getattr(args, "seats", 1)
    return f"{llm}, {args.asr} ASR{where}" + (f", {seats} seats per worker process" if seats > 1 else "")


COLUMNS = [
    "transport",
    "turn detection",
    "callers",
    "record",
    "turns",
    "v2v p50 ms",
    "v2v p95 ms",
    "heard p50 ms",
    "heard p95 ms",
    "ASR RTF",
    "TTS RTF",
    "gateway CPU % per session",
    "worker MB",
    "MB/session",
    "ASR batch",
    "rec MB/min",
    "errors",
    "real time",
]


def run(args: argparse.Namespace) -> int:
    from omnivox.engines.registry import seats_refusal

    refusal = seats_refusal("pipeline" if args.pipeline else "cascade", args.seats)
    if refusal:
        raise SystemExit(f"bench realtime: {refusal}")
    clips = [speech_clip(s) for s in SENTENCES]
    rows: list[list[Any]] = []
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="omnivox-bench-") as scratch:
        for transport in args.transport:
            for mode in args.detection:
                for record in args.record:
                    for users in args.users:
                        args.mode, args.transport_now = mode, transport
                        data_dir = Path(scratch) / f"{transport}-{mode}-{record}-n{users}"
                        r = measure(args, users, clips, record_env(record, data_dir))
                        r["recorded"] = recorded(data_dir) if record == "on" else None
                        key = f"{transport}/{mode}/{users}" + ("/record" if record == "on" else "")
                        results[key] = r
                        rows.append(table_row(transport, mode, users, record, r))
    print_table(
        f"Realtime voice-to-voice, {args.turns} turns per caller, {describe(args)}"
        f" (server_vad: silence_duration_ms={args.silence_ms}); {pacing(args.pause_s)},"
        f" {mic_noise(args.mic_noise_db)}",
        COLUMNS,
        rows,
    )
    for key, r in results.items():
        rec = r.get("recorded")
        if rec and (rec["dropped_frames"] or rec["complete"] != rec["sessions"]):
            print(f"  {key}: recorder {rec}")
        if r.get("dry_ms"):
            dry = r["dry_ms"]
            print(
                f"  {key}: reply audio ran dry in {sum(d > 0 for d in dry)} of {len(dry)} replies, "
                f"p50 {percentile(dry, 50):.0f} ms / max {max(dry):.0f} ms a reply"
            )
        if r["errors"]:
            print(f"  {key}: errors {statistics.multimode(r['errors'])} ({len(r['errors'])} in all)")
    print_breakdown(args, results, clips)
    print_cpu(results)
    write_json(
        args.json,
        {
            "realtime": results,
            "turns_per_caller": args.turns,
            "silence_ms": args.silence_ms,
            "models": describe(args),
        },
    )
    return 0


def table_row(transport: str, mode: str, users: int, record: str, result: dict[str, Any]) -> list[Any]:
    rec = result.get("recorded")
    return [
        transport,
        mode,
        users,
        record,
        result["turns"],
        result["v2v_p50_ms"],
        result["v2v_p95_ms"],
        result["heard_p50_ms"],
        result["heard_p95_ms"],
        result["asr_rtf"],
        result["tts_rtf"],
        result["gateway_cpu_pct"],
        result["worker_rss_mb"],
        result["mb_per_session"],
        result.get("asr_batch", "-"),
        rec["mb_per_min"] if rec else "-",
        len(result["errors"]),
        "yes" if result["real_time"] else "no",
    ]


def turn_wait_s(mode: str, silence_ms: int) -> float:
    """The longest a turn's end may wait on turn detection when the model judges it finished:
    ``silence_ms`` with server_vad, the "finished" pause of a semantic_vad eagerness."""
    if mode == "server_vad":
        return silence_ms / 1000
    from omnivox.voice.turn.policy import SemanticTurnPolicy

    return SemanticTurnPolicy.for_eagerness(mode).finished_ms / 1000


def measure(args: argparse.Namespace, users: int, clips: list, extra_env: dict[str, str]) -> dict[str, Any]:
    """One run: a cluster for ``users`` callers (``args``: the models, transport, turn detection
    ``mode``), the callers' calls, and what they and the servers measured."""
    seats = getattr(args, "seats", 1)  # (the benches that reuse this one have no --seats)
    workers = args.workers or -(-users // seats)  # enough seats for every caller
    log_dir = Path(args.log_dir) / f"{args.transport_now}-{args.mode}-n{users}" if args.log_dir else None
    if log_dir:
        log_dir.mkdir(parents=True, exist_ok=True)
    env = {**cluster_env(args), **extra_env, **(LOOPBACK_ENV if args.transport_now == "webrtc" else {})}
    spec = pipeline_spec(args, users, log_dir) if args.pipeline else None
    if spec:  # as serve --pipeline: a worker key, so the pipeline's sockets speak CurveZMQ
        env.setdefault("OMNIVOX_WORKER_KEY", secrets.token_hex(16))
    with cluster(
        workers=workers, engine="cascade", log_dir=log_dir, pipeline=spec, env=env, seats=seats
    ) as c:
        assert c.gateway is not None
        serving = [c.gateway.pid, *(w.pid for w in c.workers)]
        if c.coordinator is not None:
            serving += [c.coordinator.pid, *stage_pids(c.pipeline_view())]
        parts = component_pids(
            c.gateway.pid,
            [w.pid for w in c.workers],
            c.coordinator.pid if c.coordinator is not None else None,
            c.pipeline_view() if spec else {},
        )
        began, cpu0 = time.monotonic(), cpu_seconds(c.gateway.pid)
        serving_cpu0 = sum(cpu_seconds(pid) for pid in serving)
        parts_cpu0 = cpu_by_component(parts)
        stats = asyncio.run(_load(c.url, users, clips, args))
        wall = time.monotonic() - began
        parts_cpu = cpu_shares(parts_cpu0, cpu_by_component(parts), wall, users)
        rtf = real_time_factors(httpx.get(c.url + "/metrics", timeout=5).text)
        rss = [rss_mb(w.pid) for w in c.workers]
        gateway_rss = rss_mb(c.gateway.pid)
        view = c.pipeline_view() if spec else {}
        shared = [rss_mb(pid) for pid in stage_pids(view)]
        if c.coordinator is not None:
            shared.append(rss_mb(c.coordinator.pid))
        wait_finished(Path(env["OMNIVOX_DATA_DIR"]))
        gateway_cpu = cpu_seconds(c.gateway.pid) - cpu0  # the recorder's work included, replays too
        serving_cpu = sum(cpu_seconds(pid) for pid in serving) - serving_cpu0
    v2v = [s for st in stats for s in st.v2v_s]
    marks = [m for st in stats for m in st.turn_marks]
    heard = [s for st in stats for s in st.heard_s]
    errors = [e for st in stats for e in st.errors]
    p95 = percentile(v2v, 95)
    # a reply later than the longest the turn detection may wait plus the headroom is not real time
    wait_s = turn_wait_s(args.mode, args.silence_ms)
    held = bool(v2v) and not errors and all(r < 1.0 for r in rtf.values()) and p95 < wait_s + HEADROOM_S
    return {
        "workers": workers,
        "seats": seats,
        "turns": len(v2v),
        "v2v_p50_ms": percentile(v2v, 50) * 1000,
        "v2v_p95_ms": p95 * 1000,
        "v2v_max_ms": max(v2v) * 1000 if v2v else float("nan"),
        "heard_p50_ms": percentile(heard, 50) * 1000,
        "heard_p95_ms": percentile(heard, 95) * 1000,
        "dry_ms": [d * 1000 for st in stats for d in st.dry_s],
        "asr_rtf": rtf.get("asr", float("nan")),
        "tts_rtf": rtf.get("tts", float("nan")),
        "worker_rss_mb": statistics.fmean(rss) if rss else float("nan"),
        "stage_rss_mb": sum(shared),
        "gateway_rss_mb": gateway_rss,
        "mb_per_session": (sum(rss) + sum(shared)) / users,
        "asr_batch": asr_batch(view),
        "stages": view.get("stages", []),
        "gateway_cpu_pct": 100 * gateway_cpu / wall / users,
        "serving_cpu_s": serving_cpu,  # gateway, workers (and a pipeline's processes), over the calls
        "cpu_pct_per_session": parts_cpu,  # by component, % of one core per session over the calls
        "asr_split": asr_split(view),
        "errors": errors,
        "breakdown_p50_ms": median_marks(marks),
        "wall_s": wall,
        "real_time": held,
    }


def print_cpu(results: dict[str, dict[str, Any]]) -> None:
    """Where the serving CPU went: each component's share of one core per session over the calls, and
    with a pipeline the ASR stage's decode time split into finals and partials."""
    names: list[str] = []
    for r in results.values():
        names += [n for n in r.get("cpu_pct_per_session", {}) if n not in names]
    rows = []
    for key, r in results.items():
        shares = r.get("cpu_pct_per_session", {})
        split = r.get("asr_split") or {}
        asr = (
            f"{split['final_decode_s']:.1f} s / {split['finals']:.0f} + {split['partial_decode_s']:.1f} s"
            f" / {split['partials']:.0f}"
            if split
            else "-"
        )
        rows.append([key, *(shares.get(n, float("nan")) for n in names), sum(shares.values()), asr])
    if rows:
        print_table(
            "CPU per session by component, % of one core over the calls"
            " (ASR decodes: finals s / count + partials s / count)",
            ["run", *names, "total", "ASR finals + partials"],
            rows,
        )


def print_breakdown(args: argparse.Namespace, results: dict[str, dict[str, Any]], clips: list) -> None:
    """Where the voice-to-voice went (p50 of each stage's mark, ms after the end of speech), and with
    ``--floor`` each turn detection's floor: every stage alone on this machine (``bench.floor``)."""
    rows = [[key, *row(r["breakdown_p50_ms"])] for key, r in results.items() if r.get("breakdown_p50_ms")]
    if args.floor:
        from omnivox.bench.floor import load_stack, measure_floor

        stack = load_stack(args)  # after the load runs: its models never compete with the servers'
        try:
            for mode in args.detection:
                args.mode = mode
                floor = measure_floor(stack, clips, RATE, args)
                results[f"floor/{mode}"] = {"breakdown_p50_ms": floor}
                rows.append([f"floor/{mode}", *row(floor)])
        finally:
            stack.close()
    if rows:
        print_table(
            "Voice to voice, broken down: p50 ms after the end of the user's speech"
            " (the server's stages, then the caller's v2v)",
            ["run", *BREAKDOWN_COLUMNS],
            rows,
        )
