"""``omnivox serve`` (gateway + local workers) and ``omnivox gateway`` (gateway alone)."""

from __future__ import annotations

import functools
import gc
import logging
import secrets

import uvicorn
from fastapi import FastAPI

from omnivox.core.config import Settings
from omnivox.core.keys import is_loopback
from omnivox.gateway.app import Hook, create_gateway_app
from omnivox.gateway.edges.mount import ClientSockets
from omnivox.gateway.local_workers import _free_port, supervise_coordinator, supervise_workers

__all__ = ["check_exposure", "is_loopback", "serve", "serve_settings"]


def _run(settings: Settings, app: FastAPI) -> None:
    # everything loaded so far (the app, its imports: about a million objects) lives as long as the
    # process: out of the collector's sight, a full collection with thousands of clients connected
    # costs tens of milliseconds less, and a waiting client's dispatch waits that much less
    gc.collect()
    gc.freeze()
    uvicorn.run(
        ClientSockets(app),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        log_config=None,  # its lines go through our handlers (text or JSON), not uvicorn's own
        ws_max_size=settings.max_message_bytes * 2,
        # the sans-I/O websockets implementation: half the memory per open socket of the legacy one
        # (docs/benchmarks.md, bench pool), which matters with thousands queued
        ws="websockets-sansio",
        # per-message deflate keeps zlib state for each socket (about 49 KiB each, measured with
        # 1,000 waiting clients): with thousands waiting that is most of the gateway's memory
        ws_per_message_deflate=settings.ws_compression,
    )


log = logging.getLogger(__name__)


def check_exposure(settings: Settings) -> None:
    """Without any key, listen on loopback only (unless ``public``), and say so at startup."""
    if settings.any_key:
        return
    if not is_loopback(settings.host) and not settings.public:
        raise SystemExit(
            f"omnivox: refusing to listen on {settings.host} without keys: anyone who reaches it could "
            "use every API. Set OMNIVOX_API_KEY (or OMNIVOX_CLIENT_KEY / _ADMIN_KEY / _WORKER_KEY), "
            "or pass --public to listen there anyway."
        )
    where = "this machine only (loopback)" if is_loopback(settings.host) else "anyone (--public)"
    log.warning(
        "no keys configured: every API on %s:%d is open to %s; set OMNIVOX_API_KEY to require one",
        settings.host,
        settings.port,
        where,
    )


def run_gateway(settings: Settings) -> None:
    check_exposure(settings)
    _run(settings, create_gateway_app(settings))


def serve_settings(settings: Settings) -> Settings:
    """What ``omnivox serve`` changes of the settings: a worker key its own workers share, and
    recording on unless told otherwise (a bare gateway records nothing unless told to)."""
    key = settings.key_for("worker")
    if key is None:
        # the local workers and this gateway share a key nobody else knows: nobody else can register
        # a worker, and the workers take sessions from this gateway only
        key = secrets.token_urlsafe(32)
        log.info("local workers use a generated worker key; set OMNIVOX_WORKER_KEY to let remote ones join")
    update: dict[str, object] = {"worker_key": key}  # handed to the local workers
    if settings.record_sessions is None:
        update["record_sessions"] = True
    return settings.model_copy(update=update)


def serve(settings: Settings) -> None:
    check_exposure(settings)
    settings = serve_settings(settings)
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    gateway_url = f"http://{host}:{settings.port}"
    hooks: list[Hook] = []
    if settings.pipeline:
        # the coordinator and its stages next to the gateway; the workers become light session
        # hosts on the `pipeline` engine that share the stages' models
        port = settings.coordinator_port or _free_port(settings.stage_host)
        stage_host = "127.0.0.1" if settings.stage_host in ("0.0.0.0", "::") else settings.stage_host
        settings = settings.model_copy(
            update={
                "engine": "pipeline",
                "coordinator": f"tcp://{stage_host}:{port}",
                "coordinator_port": port,
            }
        )
        hooks.append(functools.partial(supervise_coordinator, settings, gateway_url))
    if settings.workers:
        hooks.append(functools.partial(supervise_workers, settings, gateway_url, settings.workers))
    _run(settings, create_gateway_app(settings, background=hooks))
