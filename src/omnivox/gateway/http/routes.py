"""HTTP routes of the gateway: health, workers, queue, metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from omnivox import __version__
from omnivox.core.config import Settings
from omnivox.core.errors import OmnivoxError
from omnivox.gateway.auth import allowed, offered_key, require, require_same_origin
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.protocol.control.pipeline import PipelineReport
from omnivox.protocol.control.workers import Registration, RegistrationReply, WorkerState, worker_base_url

router = APIRouter()


def _ctx(request: Request) -> GatewayContext:
    return request.app.state.ctx


@router.get("/health")
async def health(request: Request) -> dict[str, Any]:
    pool = _ctx(request).pool
    states = [w.state for w in pool.workers.values()]
    usable = sum(1 for s in states if s is WorkerState.IDLE or s.busy)
    problems = [
        f"worker {w.worker_id}: {problem}"
        for w in pool.workers.values()
        if w.state is WorkerState.IDLE or w.state.busy
        for problem in w.problems
    ]
    if not usable:
        problems.insert(0, "no worker can take a session")
    body: dict[str, Any] = {
        "status": "degraded" if problems else "ok",
        "problems": problems,
        "version": __version__,
        "workers": len(states),
        "workers_idle": sum(1 for s in states if s is WorkerState.IDLE),
        "workers_usable": usable,
        "queue_length": pool.queue_length,
    }
    ctx = _ctx(request)
    report = ctx.pipeline
    if report is not None:
        stale = _pipeline_stale(ctx)
        body["pipeline"] = {
            "name": report.pipeline,
            "stages": len(report.stages),
            "stages_alive": 0 if stale else report.alive,
            "stale": stale,
            "session_slots": pool.session_slots,
            "session_slots_used": pool.slots_used(),
        }
    return body


PIPELINE_STALE_S = 5.0  # a coordinator reports about every second: this long without one, it is gone


def _pipeline_stale(ctx: GatewayContext) -> bool:
    return ctx.pool.clock() - ctx.pipeline_at > PIPELINE_STALE_S


def _refuse(err: OmnivoxError) -> HTTPException:
    return HTTPException(err.http_status, detail={"code": err.code, "message": err.message})


ADMIN = [Depends(require("admin"))]


@router.get("/api/workers", dependencies=ADMIN)
async def list_workers(request: Request) -> dict[str, Any]:
    pool = _ctx(request).pool
    now = pool.clock()
    return {"workers": [w.view(now) for w in pool.workers.values()]}


@router.post(
    "/api/workers/register", response_model=RegistrationReply, dependencies=[Depends(require("worker"))]
)
async def register(body: Registration, request: Request) -> RegistrationReply:
    """A worker registers (and re-registers as its heartbeat). What it says of its health is not
    taken: the gateway checks the worker itself, at once when it is new."""
    ctx = _ctx(request)
    try:
        url = worker_base_url(body.url)
        known = any(w.url == url for w in ctx.pool.workers.values())
        worker = ctx.pool.add_worker(url, body.worker_id)
    except OmnivoxError as err:
        raise _refuse(err) from None
    if not known:
        ctx.health.check_soon(worker)
    return RegistrationReply(
        worker_id=worker.worker_id, heartbeat_interval_s=ctx.settings.heartbeat_interval_s
    )


@router.post("/api/pipeline", dependencies=[Depends(require("worker"))])
async def pipeline_report(body: PipelineReport, request: Request) -> dict[str, Any]:
    """A pipeline coordinator reports its stages (about every second). Their session slots bound the
    voice sessions its workers take at once: past them, sessions wait in the queue."""
    ctx = _ctx(request)
    ctx.pipeline, ctx.pipeline_at = body, ctx.pool.clock()
    ctx.pool.set_session_slots(body.session_slots)
    return {"ok": True}


@router.get("/api/stages", dependencies=ADMIN)
async def stages(request: Request) -> dict[str, Any]:
    """The staged pipeline's stages and their load, as its coordinator last reported them."""
    ctx = _ctx(request)
    report = ctx.pipeline
    if report is None:
        return {"pipeline": None, "stages": []}
    return {
        **report.model_dump(mode="json"),
        "reported_s_ago": round(ctx.pool.clock() - ctx.pipeline_at, 3),
        "stale": _pipeline_stale(ctx),  # no report for a while: what it shows may be gone
        "session_slots_used": ctx.pool.slots_used(),
    }


@router.get("/api/sessions", dependencies=ADMIN)
async def sessions(request: Request) -> dict[str, Any]:
    """The sessions connected now: kind, state (idle, queued, active), worker, turns, age."""
    views = _ctx(request).sessions.views()
    return {"active_sessions": len(views), "sessions": views}


@router.get("/api/queue", dependencies=ADMIN)
async def queue(request: Request) -> dict[str, Any]:
    pool = _ctx(request).pool
    snap = pool.snapshot()
    now = pool.clock()
    return {
        "queue_length": pool.queue_length,
        "max_queue_size": pool.max_queue_size,
        "tickets": [
            {
                "ticket_id": t.ticket_id,
                "task_type": t.task_type,
                "position": snap[t.ticket_id][0],
                "estimated_wait_s": snap[t.ticket_id][1],
                "waited_s": round(now - t.enqueued_at, 3),
            }
            for t in pool.queued()
        ],
    }


@router.get("/api/queue/{ticket_id}", dependencies=ADMIN)
async def ticket(ticket_id: str, request: Request) -> dict[str, Any]:
    pool = _ctx(request).pool
    t = pool.ticket(ticket_id)
    if t is None:
        raise HTTPException(404, detail={"code": "not_found", "message": f"no ticket {ticket_id}"})
    pos = pool.position(ticket_id)
    return {
        "ticket_id": t.ticket_id,
        "task_type": t.task_type,
        "status": "queued" if pos else "assigned",
        "position": pos[0] if pos else 0,
        "estimated_wait_s": pos[1] if pos else 0.0,
        "worker_id": t.worker_id,
    }


@router.delete("/api/queue/{ticket_id}", dependencies=[Depends(require_same_origin), *ADMIN])
async def cancel_ticket(ticket_id: str, request: Request) -> dict[str, Any]:
    if not _ctx(request).pool.cancel(ticket_id):
        raise HTTPException(404, detail={"code": "not_found", "message": f"no queued ticket {ticket_id}"})
    return {"ticket_id": ticket_id, "cancelled": True}


def _models(ctx: GatewayContext) -> list[dict[str, Any]]:
    """What ``model`` a client may name: ``omnivox`` (the voice agent; any name is taken as it) and
    the engine of each worker that can serve."""
    engines = sorted(
        {w.engine for w in ctx.pool.workers.values() if w.engine and w.state is not WorkerState.OFFLINE}
    )
    return [
        {"id": name, "object": "model", "created": 0, "owned_by": "omnivox"} for name in ["omnivox", *engines]
    ]


@router.get("/v1/models", dependencies=[Depends(require("client"))])
async def list_models(request: Request) -> dict[str, Any]:
    """OpenAI-compatible: tools probe it before they connect."""
    return {"object": "list", "data": _models(_ctx(request))}


@router.get("/v1/models/{model_id}", dependencies=[Depends(require("client"))])
async def get_model(model_id: str, request: Request) -> dict[str, Any]:
    for model in _models(_ctx(request)):
        if model["id"] == model_id:
            return model
    raise HTTPException(404, detail={"code": "model_not_found", "message": f"no model {model_id!r}"})


def metrics_need_admin(settings: Settings) -> bool:
    """Whether /metrics needs the admin key: as configured, else whenever an admin key is set (they
    say how many sessions run, which errors happen, how the workers are: not for everyone)."""
    if settings.metrics_need_admin is not None:
        return settings.metrics_need_admin
    return settings.key_for("admin") is not None


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    ctx = _ctx(request)
    if metrics_need_admin(ctx.settings) and not allowed(ctx.settings, "admin", offered_key(request.headers)):
        raise HTTPException(401, detail={"code": "unauthorized", "message": "metrics need the admin key"})

    def refresh(m: GatewayMetrics) -> None:
        m.queue_length.set(ctx.pool.queue_length)
        for state in WorkerState:
            m.workers.labels(state.value).set(sum(1 for w in ctx.pool.workers.values() if w.state is state))

    return Response(ctx.metrics.render(refresh), media_type=CONTENT_TYPE_LATEST)
