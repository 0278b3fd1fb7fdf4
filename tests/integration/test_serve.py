"""``omnivox serve``: one command starts a gateway and its local workers, with the flags it was given."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from cluster import free_port
from fake_openai_service import FakeOpenAIService
from wsclient import StreamingClient


@pytest.fixture
def llm_server():
    service = FakeOpenAIService().start()
    yield service
    service.stop()


async def one_turn(port: int, text: str) -> dict:
    async with StreamingClient(f"ws://127.0.0.1:{port}", "serve") as cl:
        return await cl.turn([{"role": "user", "content": text}])


def test_serve_starts_workers_that_inherit_the_voice_flags(tmp_path, llm_server):
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")
    env = {**os.environ, "OMNIVOX_HEALTH_INTERVAL_S": "0.3", "OMNIVOX_HEARTBEAT_INTERVAL_S": "0.3"}
    cmd = [sys.executable, "-m", "omnivox", "serve", "--port", str(port), "--workers", "2"]
    cmd += ["--llm-url", llm_server.url, "--log-level", "WARNING"]  # cascade is the default engine
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        health: dict = {}
        while time.monotonic() < deadline:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()
                if health.get("workers_idle") == 2:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        assert health.get("workers_idle") == 2, health
        workers = httpx.get(f"http://127.0.0.1:{port}/api/workers").json()["workers"]
        assert {w["engine"] for w in workers} == {"cascade"}
        assert all(w["capabilities"]["realtime"] and w["capabilities"]["audio_in"] for w in workers)
        turn = asyncio.run(one_turn(port, "are you there"))
        # the reply comes from the LLM server given to `serve`: the flag reached the worker processes
        assert turn["text"] == "Fake reply to: are you there. Have a nice day!"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode is not None
