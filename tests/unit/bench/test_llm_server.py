"""The bench's LLM server process: started, waited for, stopped, and its log file let go. A short
``sleep`` process stands in for llama.cpp's server (a mock: no model in a unit test)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from omnivox.bench import llm_server as module
from omnivox.bench.llm_server import LlmServer, llm_server, stop_process, wait_ready

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_stop_process_ends_a_running_process_and_leaves_an_ended_one_alone() -> None:
    proc = subprocess.Popen(SLEEPER)
    stop_process(proc)
    assert proc.returncode == -15  # SIGTERM was enough
    stop_process(proc)  # already gone: nothing to do, nothing raised
    assert proc.returncode == -15


def test_a_process_that_ignores_sigterm_is_killed() -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    stop_process(proc, timeout_s=0.2)
    assert proc.returncode == -9
    proc.stdout.close()


def test_waiting_for_a_server_that_exited_says_so() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    with pytest.raises(RuntimeError, match="exited with 3 before it was ready"):
        wait_ready("http://127.0.0.1:9/v1", proc)


def test_waiting_past_the_timeout_says_where_it_waited() -> None:
    proc = subprocess.Popen(SLEEPER)
    try:
        with pytest.raises(TimeoutError, match=r"http://127.0.0.1:9/v1 was not ready in 0 s"):
            wait_ready("http://127.0.0.1:9/v1", proc, timeout_s=0.0)
    finally:
        stop_process(proc)


@pytest.mark.parametrize("ready", [True, False])
def test_the_server_and_its_log_are_let_go_when_the_block_ends(tmp_path, monkeypatch, ready) -> None:
    started: list[subprocess.Popen[bytes]] = []
    opened: list = []
    real_open, real_popen = open, subprocess.Popen

    def popen(cmd, stdout, stderr):
        assert cmd[1:3] == ["-m", "omnivox.bench.llm_server"] and "--parallel" in cmd
        started.append(real_popen(SLEEPER, stdout=stdout, stderr=stderr))
        return started[-1]

    def tracked_open(*args, **kwargs):
        opened.append(real_open(*args, **kwargs))
        return opened[-1]

    def wait(url, proc):
        if not ready:
            raise TimeoutError("not ready")
        return "smollm2"

    monkeypatch.setattr(module.subprocess, "Popen", popen)
    monkeypatch.setattr(module, "open", tracked_open, raising=False)
    monkeypatch.setattr(module, "wait_ready", wait)
    log = tmp_path / "llm.log"
    if ready:
        with llm_server(2, log=log) as server:
            assert isinstance(server, LlmServer) and server.model == "smollm2"
            assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/v1")
            assert server.pid == started[0].pid
    else:
        with pytest.raises(TimeoutError), llm_server(2, log=log):
            pytest.fail("entered without a ready server")
    assert started[0].returncode is not None  # stopped
    assert len(opened) == 1 and opened[0].closed  # the log file is not left open
