"""Chaos under paced load: workers, pipeline stages and the gateway killed, paused and restarted at
random, and afterwards nothing stuck.

``omnivox bench chaos --seconds 300`` starts a gateway that records, one worker of its own (the
cascade with the echo LLM and PocketSphinx) and a staged pipeline (``cascade``: Whisper, echo LLM
and hibari stages) with two light workers on it; ``--callers`` callers call ``/v1/realtime`` over
and over (turns spoken in real time, as ``bench soak``). Every ``--every-s`` (a seeded random wait
around it) one of them is hit:

- a worker: killed (SIGKILL) and started again on its port, or paused (SIGSTOP) for 1-4 s;
- a stage: killed (its coordinator starts it again) or paused;
- the gateway (``--gateway-share`` of the hits): killed and started again on its port (its workers
  re-register, its cut recordings are finished at the new start), or paused.

Every call must end served (all its turns answered), refused with a reason (an error code before
it was served), or told what failed (an error event, a close code, or its connection cut while
the gateway was killed); a call left waiting with no word (``stuck``) or cut while the gateway was
up (``dropped``) fails the run. Afterwards, within ``--settle-s``: every worker IDLE, no pipeline
slot and no session held, no relay shared-memory segment left, no recording unfinished, the open
files of the processes that lived through it back to where they were, and a new call served.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from omnivox.bench.fuzz_outcomes import tracebacks
from omnivox.bench.realtime import SENTENCES, speech_clip
from omnivox.bench.soak import SoakCaller, open_files
from omnivox.bench.table import print_table, write_json
from omnivox.pipeline.relay import segments
from omnivox.testing.cluster import Cluster, free_port

SERVED, REFUSED, TOLD, STUCK, DROPPED = (
    "served",
    "refused with a reason",
    "told what failed",
    "stuck",
    "dropped",
)
GOOD = (SERVED, REFUSED, TOLD)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=300.0, help="how long the chaos lasts")
    parser.add_argument("--callers", type=int, default=3)
    parser.add_argument("--every-s", type=float, default=6.0, help="mean time between two hits")
    parser.add_argument("--gateway-share", type=float, default=0.15, help="of the hits, how many the gateway")
    parser.add_argument("--settle-s", type=float, default=60.0, help="time for everything to come back")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--plan", nargs="*", help='the first hits, in order ("kill worker", "pause stage", "kill gateway"...)'
    )
    parser.add_argument("--log-dir", help="keep the server logs here")


# ---- the callers, and how each call ended


@dataclass
class Call:
    caller: str
    started: float
    ended: float = 0.0
    outcomes: list[str] = field(default_factory=list)  # each turn's, as SoakCaller words them


class ChaosCaller(SoakCaller):
    """A soak caller that keeps each call's turn outcomes apart (one ``Call`` each)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[Call] = []

    async def call(self, session_id: str, until: float) -> None:
        before = Counter(self.turns.outcomes)
        record = Call(self.name, time.monotonic())
        self.calls.append(record)
        await super().call(session_id, until)
        record.ended = time.monotonic()
        for outcome, n in (self.turns.outcomes - before).items():
            record.outcomes += [outcome] * n


@dataclass
class Hit:
    at: float
    target: str
    action: str  # kill, pause
    until: float = 0.0  # back (restarted, or continued)


def verdict(call: Call, hits: list[Hit]) -> str:
    """How a call ended, as the rules of the run judge it."""
    failed = next((o for o in call.outcomes if o != "completed"), None)
    if failed is None:
        return SERVED  # (a call whose time was up before its first turn: nothing asked, nothing owed)
    answered = any(o == "completed" for o in call.outcomes)
    gateway_down = any(h.target == "gateway" and h.at - 1.0 <= call.ended <= h.until + 2.0 for h in hits)
    if failed.startswith(("error ", "refused ")) and not answered:
        return REFUSED
    if failed.startswith(("error ", "response ", "closed ", "refused ")):
        return TOLD  # an error event, a failed response, a close code: the client knows
    if failed == "timeout":
        # a pause can hold a turn past its deadline; a stuck call is one nothing explains
        paused = any(h.action == "pause" and h.at - 30 <= call.ended <= h.until + 30 for h in hits)
        return TOLD if paused or gateway_down else STUCK
    # cut, or no connection at all: only a gateway that was down explains it
    return TOLD if gateway_down else DROPPED


# ---- the processes


class Targets:
    """The processes chaos may hit, and how each comes back."""

    def __init__(
        self, c: Cluster, worker_args: list[tuple[list[str], dict[str, str]]], admin: dict[str, str]
    ):
        self.c = c
        self.worker_args = worker_args
        self.admin = admin
        self.restarts = Counter[str]()

    def stage_pids(self) -> dict[str, int]:
        view = self.c.pipeline_view()
        return {
            f"stage {s['name']}": s["pid"] for s in view.get("stages", []) if s.get("alive") and s.get("pid")
        }

    def choose(
        self, rng: random.Random, gateway_share: float, kind: str | None = None
    ) -> tuple[str, int | None]:
        """A process to hit: of ``kind`` (gateway, worker, stage) when given, else at random."""
        if kind == "gateway" or (kind is None and rng.random() < gateway_share):
            return "gateway", self.c.gateway.pid if self.c.gateway else None
        alive = {f"worker{i}": w.pid for i, w in enumerate(self.c.workers) if w.poll() is None}
        alive.update(self.stage_pids())
        if kind is not None:
            alive = {name: pid for name, pid in alive.items() if name.startswith(kind)}
        if not alive:
            return "gateway", self.c.gateway.pid if self.c.gateway else None
        name = rng.choice(sorted(alive))
        return name, alive[name]

    def kill(self, name: str, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if name == "gateway":
            assert self.c.gateway is not None
            self.c.gateway.wait(10)
        elif name.startswith("worker"):
            self.c.workers[int(name[6:])].wait(10)
        # a stage is reaped and started again by its coordinator

    def restart(self, name: str) -> None:
        self.restarts[name] += 1
        if name == "gateway":
            self.c.gateway = self.c.spawn(
                ["gateway", "--port", str(self.c.port)], f"gateway.{self.restarts[name]}", {}
            )
            self.c.wait(lambda h: h["status"] in ("ok", "degraded"), 60)
        elif name.startswith("worker"):
            i = int(name[6:])
            args, env = self.worker_args[i]
            self.c.workers[i] = self.c.spawn(args, f"worker{i}.{self.restarts[name]}", env)

    def every_pid(self) -> dict[str, int]:
        pids = {"gateway": self.c.gateway.pid} if self.c.gateway else {}
        pids.update({f"worker{i}": w.pid for i, w in enumerate(self.c.workers)})
        if self.c.coordinator is not None:
            pids["coordinator"] = self.c.coordinator.pid
        pids.update(self.stage_pids())
        return pids


async def hit(
    targets: Targets, rng: random.Random, gateway_share: float, hits: list[Hit], planned: str | None = None
) -> None:
    """One hit: ``planned`` ("kill worker", "pause gateway"...) or one drawn at random."""
    kind, action = (planned.split()[1], planned.split()[0]) if planned else (None, None)
    name, pid = targets.choose(rng, gateway_share, kind)
    if pid is None:
        return
    action = action or ("pause" if rng.random() < 0.4 else "kill")
    record = Hit(time.monotonic(), name, action)
    hits.append(record)
    if action == "pause":
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(rng.uniform(1.0, 4.0))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    else:
        await asyncio.to_thread(targets.kill, name, pid)
        await asyncio.sleep(rng.uniform(0.2, 2.0))
        await asyncio.to_thread(targets.restart, name)
    record.until = time.monotonic()


# ---- afterwards: is anything stuck?


def leftovers(
    c: Cluster, admin: dict[str, str], pids: set[int], files_before: dict[int, int]
) -> dict[str, Any]:
    """What is still held after the run (every value 0 / empty / True when nothing is)."""
    health = c.health()
    workers = httpx.get(c.url + "/api/workers", headers=admin, timeout=5).json()["workers"]
    sessions = httpx.get(c.url + "/api/sessions", headers=admin, timeout=5).json()["sessions"]
    mine = [s for s in segments() if int(s.split("_")[1]) in pids]
    recordings = httpx.get(c.url + "/api/recordings?limit=500", headers=admin, timeout=10).json()[
        "recordings"
    ]
    # of the processes that lived through it (the same pid at the start and now)
    grown = {
        pid: n - before
        for pid, before in files_before.items()
        if (n := open_files(pid)) - before > 4 and n >= 0
    }
    return {
        "workers_not_idle": sorted(f"{w['worker_id']}:{w['state']}" for w in workers if w["state"] != "IDLE"),
        "slots_used": (health.get("pipeline") or {}).get("session_slots_used", 0),
        "sessions": len(sessions),
        "queue": health.get("queue_length", 0),
        "shm_segments": mine,
        "recordings_unfinished": sorted(r["session_id"] for r in recordings if r["status"] != "complete"),
        "open_files_grown": grown,
    }


def settled(left: dict[str, Any]) -> bool:
    return not any(left.values())


# ---- running it


def start(log_dir: Path, data_dir: Path, seed: int) -> tuple[Cluster, Targets, dict[str, str]]:
    key = f"chaos-{seed}-{os.getpid()}"
    env = {
        "OMNIVOX_API_KEY": key,
        "OMNIVOX_LLM": "echo",
        "OMNIVOX_ASR": "pocketsphinx",
        "OMNIVOX_RECORD_SESSIONS": "true",
        "OMNIVOX_RECORD_MIN_FREE_MB": "0",
        "OMNIVOX_DATA_DIR": str(data_dir),
        "OMNIVOX_REALTIME_MAX_WAIT_S": "10",
        "OMNIVOX_MAX_SESSIONS_PER_CLIENT": "0",
        "OMNIVOX_CLIENT_CONNECT_RATE": "0",
    }
    admin = {"Authorization": f"Bearer {key}"}
    c = Cluster(env=env, log_dir=log_dir)
    c.start_gateway()
    worker_args: list[tuple[list[str], dict[str, str]]] = []

    def add(engine: str, extra: dict[str, str]) -> None:
        port = free_port()
        args = ["worker", "--gateway", c.url, "--port", str(port), "--engine", engine]
        c.workers.append(c.spawn(args, f"worker{len(c.workers)}", extra))
        c.worker_urls.append(f"http://127.0.0.1:{port}")
        worker_args.append((args, extra))

    add("cascade", {})
    c.start_pipeline("cascade", timeout=300)
    for _ in range(2):
        add("pipeline", {"OMNIVOX_COORDINATOR": c.coordinator_url or ""})
    c.wait_idle(3, timeout=300)
    return c, Targets(c, worker_args, admin), admin


async def _chaos(
    c: Cluster, targets: Targets, args: argparse.Namespace, clips: list[tuple[np.ndarray, float]]
) -> tuple[list[ChaosCaller], list[Hit]]:
    rng = random.Random(args.seed)
    until = time.monotonic() + args.seconds
    caller_args = argparse.Namespace(turns=2, rest_s=1.0)
    url = c.ws + "/v1/realtime"
    key = c.env["OMNIVOX_API_KEY"]
    callers = [ChaosCaller(url, f"chaos{i}", clips, caller_args, key=key) for i in range(args.callers)]
    hits: list[Hit] = []

    plan = list(getattr(args, "plan", None) or [])

    async def chaos() -> None:
        await asyncio.sleep(3.0)  # the calls are under way first
        while time.monotonic() < until - 5:
            await hit(targets, rng, args.gateway_share, hits, plan.pop(0) if plan else None)
            await asyncio.sleep(rng.uniform(0.5, 1.5) * args.every_s)

    await asyncio.gather(chaos(), *(cl.run(until, i * 1.5) for i, cl in enumerate(callers)))
    return callers, hits


def run(args: argparse.Namespace) -> int:
    clips = [speech_clip(s) for s in SENTENCES]
    with tempfile.TemporaryDirectory(prefix="omnivox-chaos-") as scratch:
        log_dir = Path(args.log_dir) if args.log_dir else Path(scratch) / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        report = chaos_run(log_dir, Path(scratch) / "data", args, clips)
    _print(args, report)
    write_json(args.json, {"chaos": report})
    return 0 if report["ok"] else 1


def chaos_run(
    log_dir: Path,
    data_dir: Path,
    args: argparse.Namespace,
    clips: list[tuple[np.ndarray, float]] | None = None,
) -> dict[str, Any]:
    """The whole run: start, chaos under load, settle, check. Returns the report (``ok`` says all)."""
    clips = clips or [speech_clip(s) for s in SENTENCES[:2]]
    log_dir.mkdir(parents=True, exist_ok=True)
    c, targets, admin = start(log_dir, data_dir, args.seed)
    try:
        began = time.monotonic()
        files_before = {pid: open_files(pid) for pid in targets.every_pid().values()}
        seen_pids: set[int] = set(files_before)
        callers, hits = asyncio.run(_chaos(c, targets, args, clips))
        for pid in targets.every_pid().values():  # nothing left paused, whatever happened
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        seen_pids |= set(targets.every_pid().values())
        deadline = time.monotonic() + args.settle_s
        while True:
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                left = leftovers(c, admin, seen_pids | _children(c), files_before)
                if settled(left) or time.monotonic() > deadline:
                    break
            if time.monotonic() > deadline:
                left = {"unreachable": True}
                break
            time.sleep(1.0)
        final = asyncio.run(_final_call(c, clips))
    finally:
        c.stop()
    calls = [call for cl in callers for call in cl.calls]
    verdicts = Counter(verdict(call, hits) for call in calls)
    traces = tracebacks(log_dir)
    ok = settled(left) and final == SERVED and not (verdicts[STUCK] or verdicts[DROPPED]) and not traces
    return {
        "ok": ok,
        "seconds": args.seconds,
        "callers": args.callers,
        "seed": args.seed,
        "calls": dict(verdicts),
        "turns": dict(sum((Counter(call.outcomes) for call in calls), Counter())),
        "hits": dict(Counter(f"{h.action} {h.target.split(' ')[0].rstrip('0123456789')}" for h in hits)),
        "left": left,
        "unexplained": [
            {"caller": call.caller, "ended_s": round(call.ended - began, 1), "turns": call.outcomes}
            for call in calls
            if verdict(call, hits) in (STUCK, DROPPED)
        ],
        "hit_log": [
            {
                "at_s": round(h.at - began, 1),
                "target": h.target,
                "action": h.action,
                "back_s": round(h.until - began, 1),
            }
            for h in hits
        ],
        "final_call": final,
        "tracebacks": traces,
        "load_average": os.getloadavg(),
    }


def _children(c: Cluster) -> set[int]:
    """Every process the run started that may have written relay segments (stages included)."""
    found = set()
    for proc in [c.gateway, c.coordinator, *c.workers]:
        if isinstance(proc, subprocess.Popen):
            found.add(proc.pid)
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                    if c.coordinator is not None and int(stat[1]) == c.coordinator.pid:
                        found.add(int(entry))
    return found


async def _final_call(c: Cluster, clips: list[tuple[np.ndarray, float]]) -> str:
    caller = ChaosCaller(
        c.ws + "/v1/realtime",
        "after",
        clips,
        argparse.Namespace(turns=2, rest_s=0),
        key=c.env["OMNIVOX_API_KEY"],
    )
    await caller.call("after-the-chaos", time.monotonic() + 60)
    return verdict(caller.calls[0], [])


def _print(args: argparse.Namespace, report: dict[str, Any]) -> None:
    calls = report["calls"]
    print_table(
        f"Chaos: {args.seconds:g} s, {args.callers} paced callers, a hit every ~{args.every_s:g} s "
        f"(seed {args.seed})",
        [
            "calls",
            SERVED,
            REFUSED,
            TOLD,
            STUCK,
            DROPPED,
            "hits",
            "after: nothing held",
            "new call",
            "tracebacks",
        ],
        [
            [
                sum(calls.values()),
                calls.get(SERVED, 0),
                calls.get(REFUSED, 0),
                calls.get(TOLD, 0),
                calls.get(STUCK, 0),
                calls.get(DROPPED, 0),
                sum(report["hits"].values()),
                "yes" if settled(report["left"]) else "no",
                report["final_call"],
                sum(len(t) for t in report["tracebacks"].values()),
            ]
        ],
    )
    print(f"  hits: {', '.join(f'{k} {n}' for k, n in sorted(report['hits'].items()))}")
    print(f"  turns: {', '.join(f'{k} {n}' for k, n in Counter(report['turns']).most_common())}")
    if not settled(report["left"]):
        print(f"  still held: {report['left']}")
    for call in report["unexplained"]:
        print(f"  unexplained: {call}")
    for name, ends in report["tracebacks"].items():
        for end in ends[:5]:
            print(f"  {name}: {end}")
    load = report["load_average"]
    print(f"  load average (1, 5, 15 min) at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
