"""``omnivox worker``: run one worker process under uvicorn."""

from __future__ import annotations

import socket

import uvicorn

from omnivox.core.config import Settings
from omnivox.worker.app import create_worker_app


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def run_worker(settings: Settings) -> None:
    port = settings.worker_port or free_port(settings.worker_host)
    public = settings.worker_public_url or f"http://{settings.worker_host}:{port}"
    app = create_worker_app(settings, public_url=public)
    uvicorn.run(
        app,
        host=settings.worker_host,
        port=port,
        log_level=settings.log_level.lower(),
        log_config=None,  # its lines go through our handlers (text or JSON), not uvicorn's own
        ws_max_size=settings.max_message_bytes * 2,
        # the sans-I/O websockets implementation: half the memory per open socket of the legacy one
        # (docs/benchmarks.md, bench pool), which matters with thousands queued
        ws="websockets-sansio",
    )
