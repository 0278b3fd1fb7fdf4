"""What the scheduler script returns, read back: worker hashes as ``WorkerView``, assignments, and
the queue's positions and waits (computed here, as the memory store computes them, from the per-type
queues, the workers' busy times and the measured durations)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec

from omnivox.gateway.scheduling.eta import DurationModel, WaitPlan
from omnivox.gateway.scheduling.store import Assignment, WorkerView
from omnivox.protocol.control.workers import TASKS, Capabilities, WorkerState


def pairs(flat: Sequence[Any]) -> dict[str, str]:
    """A flat ``HGETALL`` reply as a dict."""
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def able(caps: Capabilities) -> str:
    """The capabilities a scheduler matches task types on, as the script reads them (",a,b,")."""
    names = sorted({cap for _, cap in TASKS.values() if getattr(caps, cap)})
    return "," + ",".join(names) + "," if names else ","


def worker_view(worker_id: str, h: dict[str, str], now_ms: int, monitor: str = "") -> WorkerView:
    cached = h.get("cached") or None
    cache_ms = h.get("cache_ms") or ""
    busy_ms = h.get("busy_ms") or ""
    return WorkerView(
        worker_id=worker_id,
        url=h["url"],
        state=WorkerState(h["state"]),
        engine=h.get("engine", ""),
        capabilities=Capabilities.model_validate_json(h.get("caps") or "{}"),
        cached_hash=cached,
        cache_age_s=round((now_ms - int(cache_ms)) / 1000, 3) if cached and cache_ms else None,
        ticket_id=h.get("ticket") or None,
        task_type=h.get("task") or None,
        busy_for_s=round((now_ms - int(busy_ms)) / 1000, 3) if busy_ms else None,
        sessions_served=int(h.get("served", 0)),
        kv_length=int(h.get("kv", 0)),
        voices=tuple(json.loads(h.get("voices") or "[]")),
        error=h.get("error") or None,
        problems=tuple(json.loads(h.get("problems") or "[]")),
        epoch=int(h.get("epoch", 0)),
        monitor=monitor or None,
    )


def assignment(entry: Sequence[Any]) -> tuple[Assignment, str, int]:
    """A dispatch entry ``{ticket, worker, url, engine, task, epoch, hit, gateway, busy_ms}``: the
    assignment, the gateway holding its client, and when the worker became busy (ms)."""
    tid, wid, url, engine, task, epoch, hit, gateway, busy_ms = entry
    given = Assignment(
        ticket_id=tid,
        worker_id=wid,
        url=url,
        engine=engine or "",
        task_type=task,
        epoch=int(epoch),
        cache_hit=hit == "1",
    )
    return given, gateway, int(busy_ms)


def event_assignment(fields: dict[str, str]) -> tuple[Assignment, int]:
    """An ``assigned`` event of a gateway's inbox: the assignment, and when it was made (ms)."""
    given = Assignment(
        ticket_id=fields["t"],
        worker_id=fields["w"],
        url=fields["u"],
        engine=fields.get("e", ""),
        task_type=fields["q"],
        epoch=int(fields["ep"]),
        cache_hit=fields.get("h") == "1",
    )
    return given, int(fields.get("b", 0))


def durations(eta: dict[str, str], alpha: float, min_samples: int) -> DurationModel:
    """The measured durations (the ``eta`` hash) as a model."""
    model = DurationModel(alpha=alpha, min_samples=min_samples)
    for task in TASKS:
        if f"{task}:n" in eta:
            model._samples[task] = int(eta[f"{task}:n"])
            model._ema[task] = float(eta[f"{task}:ema"])
    return model


def _plan(now_ms: int, workers: Sequence[Any], model: DurationModel) -> WaitPlan:
    remaining = []
    for state_name, task, busy_ms in workers:
        worker_state = WorkerState(state_name)
        if worker_state in (WorkerState.IDLE, WorkerState.LOADING):
            remaining.append(0.0)
        elif worker_state.busy and task and busy_ms:
            remaining.append(model.expected(task) - (now_ms - int(busy_ms)) / 1000)
    return WaitPlan(remaining, model)


def seq_places(
    state: Sequence[Any], mine: dict[int, str], alpha: float, min_samples: int
) -> tuple[int, dict[str, tuple[int, float]], WaitPlan]:
    """From a ``queue_seqs`` reply: the queue's length, (position, wait) of the tickets in ``mine``
    (seq -> ticket id), and the plan after the last ticket."""
    now_ms, packed, workers, eta = int(state[0]), state[1], state[2], pairs(state[3])
    model = durations(eta, alpha, min_samples)
    raw = packed.encode("utf-8", "surrogateescape") if isinstance(packed, str) else packed  # (binary)
    per_task = msgspec.msgpack.decode(raw)
    order = sorted((seq, i) for i, seqs in enumerate(per_task) for seq in seqs)
    tasks = list(TASKS)
    plan = _plan(now_ms, workers, model)
    places = {}
    for position, (seq, i) in enumerate(order, 1):
        wait = plan.add(tasks[i])
        tid = mine.get(seq)
        if tid is not None:
            places[tid] = (position, round(max(0.0, wait), 1))
    return len(order), places, plan


def queue_places(
    state: Sequence[Any], alpha: float, min_samples: int
) -> tuple[list[tuple[str, str, int, float]], WaitPlan]:
    """The queue in order from a ``queue_state`` reply: (ticket, task, position, wait in s) each;
    and the plan after the last ticket (a ticket joining the tail is placed on it)."""
    now_ms, queues, workers, eta = int(state[0]), state[1], state[2], pairs(state[3])
    model = durations(eta, alpha, min_samples)
    entries = []
    for task, flat in zip(TASKS, queues, strict=True):
        for i in range(0, len(flat), 2):
            entries.append((float(flat[i + 1]), flat[i], task))
    entries.sort()
    plan = _plan(now_ms, workers, model)
    places = [
        (tid, task, i + 1, round(max(0.0, round(plan.add(task), 1)), 1))
        for i, (_, tid, task) in enumerate(entries)
    ]
    return places, plan
