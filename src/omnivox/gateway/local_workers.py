"""Local worker processes started by ``omnivox serve``, restarted if they die.

Workers are separate processes (``python -m omnivox worker``) that register with this gateway, so
the gateway never imports an engine: a local worker is reached exactly like a remote one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import sys
from collections.abc import Callable

from omnivox.core.config import WORKER_ROLES, Settings

log = logging.getLogger(__name__)


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def die_with_parent() -> None:
    """In the child, before it runs: the kernel kills it when its parent dies (Linux), so a worker
    never outlives ``omnivox serve``, however that ends (SIGKILL included)."""
    if sys.platform != "linux":
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def worker_env(settings: Settings) -> dict[str, str]:
    """The settings a local worker inherits, as OMNIVOX_* variables (flags given to ``serve`` too):
    those of the roles a worker shares with ``serve`` (``WORKER_ROLES``)."""
    env = {}
    for role in WORKER_ROLES:
        for name, value in settings.role(role).model_dump(mode="json").items():
            if value is not None:
                env[f"OMNIVOX_{name.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


def worker_command(settings: Settings, gateway_url: str, port: int) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "omnivox",
        "worker",
        "--gateway",
        gateway_url,
        "--host",
        settings.worker_host,
        "--port",
        str(port),
        "--engine",
        settings.engine,
        "--log-level",
        settings.log_level,
    ]
    if settings.model:
        cmd += ["--model", settings.model]
    if settings.seats > 1:
        cmd += ["--seats", str(settings.seats)]  # each seat registers as a worker of its own
    return cmd


def coordinator_command(settings: Settings, gateway_url: str, port: int) -> list[str]:
    assert settings.pipeline
    return [
        sys.executable,
        "-m",
        "omnivox",
        "coordinator",
        "--pipeline",
        settings.pipeline,
        "--host",
        settings.stage_host,
        "--port",
        str(port),
        "--gateway",
        gateway_url,
        "--log-level",
        settings.log_level,
    ]


async def supervise_coordinator(settings: Settings, gateway_url: str, restart_delay_s: float = 1.0) -> None:
    """Run the pipeline coordinator (which starts and restarts its local stages) until cancelled."""
    assert settings.coordinator is not None
    port = int(settings.coordinator.rsplit(":", 1)[1])
    while True:
        code = await _run_child(
            coordinator_command(settings, gateway_url, port),
            worker_env(settings),
            15,
            lambda pid: log.info(
                "pipeline %s: coordinator started (pid %d, port %d)", settings.pipeline, pid, port
            ),
        )
        log.warning("pipeline coordinator exited with %s; restarting in %.1fs", code, restart_delay_s)
        await asyncio.sleep(restart_delay_s)


async def supervise_workers(
    settings: Settings, gateway_url: str, count: int, restart_delay_s: float = 1.0
) -> None:
    """Run ``count`` workers until cancelled; a worker that exits is started again."""

    async def keep_one(index: int) -> None:
        port = settings.worker_port + index if settings.worker_port else _free_port(settings.worker_host)
        while True:
            code = await _run_child(
                worker_command(settings, gateway_url, port),
                worker_env(settings),
                10,
                lambda pid: log.info("local worker %d started (pid %d, port %d)", index, pid, port),
            )
            log.warning("local worker %d exited with %s; restarting in %.1fs", index, code, restart_delay_s)
            await asyncio.sleep(restart_delay_s)

    await asyncio.gather(*(keep_one(i) for i in range(count)))


async def _run_child(
    command: list[str], env: dict[str, str], grace_s: float, started: Callable[[int], None]
) -> int | None:
    """Run one child process (dying with this one) until it exits; its exit code. Cancelled: it is
    asked to terminate, and killed after ``grace_s``."""
    proc = await asyncio.create_subprocess_exec(
        *command, env={**os.environ, **env}, preexec_fn=die_with_parent
    )
    started(proc.pid)
    try:
        return await proc.wait()
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), grace_s)
        except TimeoutError:
            proc.kill()
        raise
