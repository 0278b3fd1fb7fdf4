"""``omnivox serve``'s local workers and coordinator: the commands they run, and a child process
run to its exit or ended when the gateway stops (short Python processes stand in for workers)."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from omnivox.core.config import Settings
from omnivox.gateway.local_workers import _run_child, coordinator_command, worker_command


def test_a_worker_command_names_the_gateway_its_port_engine_and_model() -> None:
    s = Settings(engine="mock", worker_host="127.0.0.2", log_level="DEBUG")
    cmd = worker_command(s, "http://127.0.0.1:8000", 9101)
    assert cmd[:4] == [sys.executable, "-m", "omnivox", "worker"]
    flags = dict(zip(cmd[4::2], cmd[5::2], strict=True))
    assert flags == {
        "--gateway": "http://127.0.0.1:8000",
        "--host": "127.0.0.2",
        "--port": "9101",
        "--engine": "mock",
        "--log-level": "DEBUG",
    }
    with_model = worker_command(Settings(engine="mock", model="tiny"), "http://g", 1)
    assert with_model[-2:] == ["--model", "tiny"]
    seated = worker_command(Settings(engine="pipeline", seats=4), "http://g", 1)
    assert seated[-2:] == ["--seats", "4"]  # each seat registers as a worker of its own


def test_a_coordinator_command_runs_the_configured_pipeline() -> None:
    cmd = coordinator_command(Settings(pipeline="voice"), "http://g", 9200)
    assert cmd[3] == "coordinator"
    flags = dict(zip(cmd[4::2], cmd[5::2], strict=True))
    assert flags["--pipeline"] == "voice" and flags["--port"] == "9200" and flags["--gateway"] == "http://g"


def test_a_coordinator_command_needs_a_pipeline() -> None:
    with pytest.raises(AssertionError):
        coordinator_command(Settings(), "http://g", 9200)


async def test_a_child_runs_with_the_env_given_and_its_exit_code_is_returned() -> None:
    pids: list[int] = []
    code = await _run_child(
        [sys.executable, "-c", "import os, sys; sys.exit(int(os.environ['OMNIVOX_TEST_CODE']))"],
        {"OMNIVOX_TEST_CODE": "7"},
        1.0,
        pids.append,
    )
    assert code == 7 and len(pids) == 1 and pids[0] != os.getpid()


async def test_a_cancelled_child_is_terminated_and_reaped_before_the_cancel_goes_on() -> None:
    pids: list[int] = []
    started = asyncio.Event()

    def on_start(pid: int) -> None:
        pids.append(pid)
        started.set()

    task = asyncio.create_task(
        _run_child([sys.executable, "-c", "import time; time.sleep(60)"], {}, 5.0, on_start)
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ProcessLookupError):  # gone and reaped: no zombie left behind
        os.kill(pids[0], 0)
