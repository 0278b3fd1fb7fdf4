"""HTTP routes of the gateway: health, workers, queue, sessions, drain, metrics."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import APIRouter, Depends, HTTPException, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from omnivox import __version__
from omnivox.core.config import Settings
from omnivox.core.errors import OmnivoxError
from omnivox.gateway.auth import allowed, offered_key, require, require_same_origin
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.protocol.control.pipeline import PipelineReport
from omnivox.protocol.control.workers import (
    Registration,
    RegistrationReply,
    SeatsRegistration,
    SeatsRegistrationReply,
    WorkerState,
    worker_base_url,
)

router = APIRouter()


def _ctx(request: Request) -> GatewayContext:
    return request.app.state.ctx


@router.get("/health")
async def health(request: Request, response: Response) -> dict[str, Any]:
    ctx = _ctx(request)
    store = ctx.store
    body: dict[str, Any] = {"status": "ok", "version": __version__}
    if ctx.draining:
        response.status_code = 503  # not ready: a load balancer sends no new client here
        body["draining"] = True
        body["active_sessions"] = len(ctx.sessions)
    try:
        workers = await store.workers()
        queue_length = await store.queue_length()
        pipeline = await store.pipeline()
        slots = await store.session_slots()
    except OmnivoxError as err:  # the store is unreachable: say so (running sessions go on)
        body.update(status="degraded", problems=[err.message], store=await store.status())
        return body
    states = [w.state for w in workers]
    usable = sum(1 for s in states if s is WorkerState.IDLE or s.busy)
    problems = [
        f"worker {w.worker_id}: {problem}"
        for w in workers
        if w.state is WorkerState.IDLE or w.state.busy
        for problem in w.problems
    ]
    if not usable:
        problems.insert(0, "no worker can take a session")
    body.update(
        status="degraded" if problems else "ok",
        problems=problems,
        workers=len(states),
        workers_idle=sum(1 for s in states if s is WorkerState.IDLE),
        workers_usable=usable,
        queue_length=queue_length,
        queued_bytes_held=ctx.held_bytes.held,  # what this gateway's waiting clients have it hold
        store=await store.status(),
    )
    if pipeline is not None:
        stale = pipeline.age_s > PIPELINE_STALE_S
        body["pipeline"] = {
            "name": pipeline.report.pipeline,
            "stages": len(pipeline.report.stages),
            "stages_alive": 0 if stale else pipeline.report.alive,
            "stale": stale,
            "session_slots": slots,
            "session_slots_used": pipeline.slots_used,
        }
    return body


PIPELINE_STALE_S = 5.0  # a coordinator reports about every second: this long without one, it is gone


def _refuse(err: OmnivoxError) -> HTTPException:
    return HTTPException(err.http_status, detail={"code": err.code, "message": err.message})


ADMIN = [Depends(require("admin"))]


@router.get("/api/workers", dependencies=ADMIN)
async def list_workers(request: Request) -> dict[str, Any]:
    try:
        workers = await _ctx(request).store.workers()
    except OmnivoxError as err:
        raise _refuse(err) from None
    return {"workers": [w.to_json() for w in workers]}


@router.post(
    "/api/workers/register", response_model=RegistrationReply, dependencies=[Depends(require("worker"))]
)
async def register(body: Registration, request: Request) -> RegistrationReply:
    """A worker registers (and re-registers as its heartbeat). What it says of its health is not
    taken: the gateway checks the worker itself, at once when it is new."""
    return (await _register(_ctx(request), [body]))[0]


@router.post(
    "/api/workers/register/seats",
    response_model=SeatsRegistrationReply,
    dependencies=[Depends(require("worker"))],
)
async def register_seats(body: SeatsRegistration, request: Request) -> SeatsRegistrationReply:
    """The seats of one worker process register (their heartbeat) in one request, each as it
    would alone; a URL that is refused refuses the request before any seat is registered."""
    return SeatsRegistrationReply(seats=await _register(_ctx(request), body.seats))


async def _register(ctx: GatewayContext, registrations: list[Registration]) -> list[RegistrationReply]:
    try:
        urls = [worker_base_url(body.url) for body in registrations]
        replies = []
        for body, url in zip(registrations, urls, strict=True):
            worker_id, new = await ctx.store.register(url, body.worker_id)
            if new:
                ctx.health.check_soon(worker_id, url)
            replies.append(
                RegistrationReply(worker_id=worker_id, heartbeat_interval_s=ctx.settings.heartbeat_interval_s)
            )
    except OmnivoxError as err:
        raise _refuse(err) from None
    return replies


@router.post("/api/pipeline", dependencies=[Depends(require("worker"))])
async def pipeline_report(body: PipelineReport, request: Request) -> dict[str, Any]:
    """A pipeline coordinator reports its stages (about every second). Their session slots bound the
    voice sessions its workers take at once: past them, sessions wait in the queue."""
    try:
        await _ctx(request).store.set_pipeline(body)
    except OmnivoxError as err:
        raise _refuse(err) from None
    return {"ok": True}


@router.get("/api/stages", dependencies=ADMIN)
async def stages(request: Request) -> dict[str, Any]:
    """The staged pipeline's stages and their load, as its coordinator last reported them."""
    try:
        pipeline = await _ctx(request).store.pipeline()
    except OmnivoxError as err:
        raise _refuse(err) from None
    if pipeline is None:
        return {"pipeline": None, "stages": []}
    return {
        **pipeline.report.model_dump(mode="json"),
        "reported_s_ago": round(pipeline.age_s, 3),
        "stale": pipeline.age_s > PIPELINE_STALE_S,  # no report for a while: what it shows may be gone
        "session_slots_used": pipeline.slots_used,
    }


@router.get("/api/sessions", dependencies=ADMIN)
async def sessions(request: Request, scope: str = "all") -> dict[str, Any]:
    """The sessions connected now: kind, state (idle, queued, active), worker, turns, age, and the
    gateway holding each. With gateways sharing a store, each is asked for its own (``scope=local``
    answers for this gateway alone); one that does not answer is listed as unreachable."""
    ctx = _ctx(request)
    here = ctx.store.gateway_id
    views = [{**v, "gateway": here} for v in ctx.sessions.views()]
    gateways: list[dict[str, Any]] = [{"gateway_id": here, "reachable": True}]
    if scope != "local":
        for gateway_id, url, listed in await _ask_peers(ctx, "/api/sessions?scope=local", request):
            gateways.append({"gateway_id": gateway_id, "url": url, "reachable": listed is not None})
            views += (listed or {}).get("sessions", [])
    body: dict[str, Any] = {"active_sessions": len(views), "sessions": views}
    if ctx.store.kind != "memory":
        body["gateways"] = gateways  # which were asked, and which answered
    return body


async def _ask_peers(
    ctx: GatewayContext, path: str, request: Request
) -> list[tuple[str, str, dict[str, Any] | None]]:
    """GET ``path`` of every other live gateway (with this request's key): (id, url, answer|None)."""
    peers = await ctx.peers.others()
    if not peers:
        return []
    headers = {k: v for k, v in request.headers.items() if k.lower() == "authorization"}
    async with httpx.AsyncClient(timeout=3.0, headers=headers) as client:

        async def ask(url: str) -> dict[str, Any] | None:
            try:
                resp = await client.get(url.rstrip("/") + path)
                resp.raise_for_status()
                return resp.json()
            except (httpx.HTTPError, ValueError):
                return None

        answers = await asyncio.gather(*(ask(url) for _, url in peers))
    return [(gw, url, answer) for (gw, url), answer in zip(peers, answers, strict=True)]


@router.post("/api/drain", dependencies=[Depends(require_same_origin), *ADMIN])
async def drain(request: Request) -> dict[str, Any]:
    """Stop taking new sessions (a rolling update's pre-stop): they are refused with
    ``gateway_draining`` so clients reconnect to another gateway; those running go on. ``/health``
    answers 503 from now on, so a load balancer stops sending any."""
    ctx = _ctx(request)
    ctx.draining = True
    return {"draining": True, "active_sessions": len(ctx.sessions)}


@router.get("/api/queue", dependencies=ADMIN)
async def queue(request: Request) -> dict[str, Any]:
    store = _ctx(request).store
    try:
        tickets = await store.queue()
    except OmnivoxError as err:
        raise _refuse(err) from None
    return {
        "queue_length": len(tickets),
        "max_queue_size": store.max_queue_size,
        "tickets": [
            {
                "ticket_id": t.ticket_id,
                "task_type": t.task_type,
                "position": t.position,
                "estimated_wait_s": t.estimated_wait_s,
                "waited_s": t.waited_s,
                "gateway": t.gateway,
            }
            for t in tickets
        ],
    }


@router.get("/api/queue/{ticket_id}", dependencies=ADMIN)
async def ticket(ticket_id: str, request: Request) -> dict[str, Any]:
    try:
        t = await _ctx(request).store.ticket(ticket_id)
    except OmnivoxError as err:
        raise _refuse(err) from None
    if t is None:
        raise HTTPException(404, detail={"code": "not_found", "message": f"no ticket {ticket_id}"})
    return t.to_json()


@router.delete("/api/queue/{ticket_id}", dependencies=[Depends(require_same_origin), *ADMIN])
async def cancel_ticket(ticket_id: str, request: Request) -> dict[str, Any]:
    try:
        cancelled = await _ctx(request).store.cancel(ticket_id)
    except OmnivoxError as err:
        raise _refuse(err) from None
    if not cancelled:
        raise HTTPException(404, detail={"code": "not_found", "message": f"no queued ticket {ticket_id}"})
    return {"ticket_id": ticket_id, "cancelled": True}


async def _models(ctx: GatewayContext) -> list[dict[str, Any]]:
    """What ``model`` a client may name: ``omnivox`` (the voice agent; any name is taken as it) and
    the engine of each worker that can serve."""
    try:
        workers = await ctx.store.workers()
    except OmnivoxError as err:
        raise _refuse(err) from None
    engines = sorted({w.engine for w in workers if w.engine and w.state is not WorkerState.OFFLINE})
    return [
        {"id": name, "object": "model", "created": 0, "owned_by": "omnivox"} for name in ["omnivox", *engines]
    ]


@router.get("/v1/models", dependencies=[Depends(require("client"))])
async def list_models(request: Request) -> dict[str, Any]:
    """OpenAI-compatible: tools probe it before they connect."""
    return {"object": "list", "data": await _models(_ctx(request))}


@router.get("/v1/models/{model_id}", dependencies=[Depends(require("client"))])
async def get_model(model_id: str, request: Request) -> dict[str, Any]:
    for model in await _models(_ctx(request)):
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

    try:
        queue_length = await ctx.store.queue_length()
        states = [w.state for w in await ctx.store.workers()]
        pipeline = await ctx.store.pipeline()
        slots = await ctx.store.session_slots()
    except OmnivoxError:  # the store is unreachable: the last figures stand
        queue_length, states, pipeline, slots = None, None, None, None

    def refresh(m: GatewayMetrics) -> None:
        if queue_length is None or states is None:
            return
        m.queue_length.set(queue_length)
        for state in WorkerState:
            m.workers.labels(state.value).set(sum(1 for s in states if s is state))
        if pipeline is not None:  # (a gateway without a pipeline says nothing of one)
            alive = 0 if pipeline.age_s > PIPELINE_STALE_S else pipeline.report.alive
            m.stages.set(len(pipeline.report.stages))
            m.stages_alive.set(alive)
            m.slots.set(slots or 0)
            m.slots_used.set(pipeline.slots_used)

    return Response(ctx.metrics.render(refresh), media_type=CONTENT_TYPE_LATEST)
