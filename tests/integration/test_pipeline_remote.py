"""A pipeline run apart, as across machines, on real processes over loopback (issue 15):
``omnivox gateway``, ``omnivox coordinator --no-local-stages``, each stage as ``omnivox stage NAME
--coordinator`` and ``omnivox worker --coordinator`` hosting sessions on them. The coordinator is
killed and started again: the stages (the same processes) register with the new one, and a session
that was open meanwhile gets a clear error and goes on with its next turn.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator

import numpy as np
import pytest

from cluster import Cluster, free_port

from ..rtclient import Events, client, silence, speech, stream

ENV = {"OMNIVOX_LLM": "echo", "OMNIVOX_ASR": "whisper", "OMNIVOX_PIPELINE_HEARTBEAT_S": "0.1"}


class Apart(Cluster):
    """A gateway, a coordinator without local stages, stage processes and pipeline workers."""

    coordinator_port: int = 0
    stage_procs: dict[str, subprocess.Popen[bytes]]

    def start_coordinator(self) -> None:
        if not self.coordinator_port:
            self.coordinator_port = free_port()
            self.coordinator_url = f"tcp://127.0.0.1:{self.coordinator_port}"
        args = ["coordinator", "--pipeline", "cascade", "--no-local-stages"]
        args += ["--port", str(self.coordinator_port), "--gateway", self.url]
        self.coordinator = self._spawn(args, "coordinator", {})

    def start_stages(self) -> None:
        assert self.coordinator_url is not None
        self.stage_procs = {
            name: self._spawn(
                ["stage", name, "--pipeline", "cascade", "--coordinator", self.coordinator_url], name, {}
            )
            for name in ("asr", "llm", "tts")
        }

    def start_worker(self) -> None:
        assert self.coordinator_url is not None
        args = ["worker", "--gateway", self.url, "--port", str(free_port())]
        self.workers.append(self._spawn([*args, "--coordinator", self.coordinator_url], "worker", {}))

    def stages(self) -> dict:
        view = self.pipeline_view()
        return {s["name"]: s for s in view.get("stages", [])} if view else {}

    def stop(self) -> None:
        super().stop()
        for proc in self.stage_procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in self.stage_procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def all_alive(h: dict) -> bool:
    pipeline = h.get("pipeline") or {}
    return pipeline.get("stages_alive") == 3 and h["workers_idle"] >= 1


@pytest.fixture(scope="module")
def apart(tmp_path_factory) -> Iterator[Apart]:
    c = Apart(env=ENV, log_dir=tmp_path_factory.mktemp("pipeline-apart"))
    c.stage_procs = {}
    try:
        c.start_gateway()
        c.start_coordinator()
        c.start_stages()
        c.start_worker()
        c.wait(all_alive, timeout=120)
        yield c
    finally:
        c.stop()


async def turn(events: Events, conn, text: str, count: int) -> object:
    await stream(conn, np.concatenate([silence(0.3), speech(text), silence(1.0)]), speed=0)
    return await events.wait_for("response.done", count=count, timeout=60)


async def test_a_worker_hosts_sessions_on_a_remote_pipeline(apart) -> None:
    async with client(apart.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        done = await turn(events, conn, "Please remind me to call my sister.", 1)
        await events.stop()
    assert done.response.status == "completed"
    assert "sister" in done.response.output[0].content[0].transcript.lower()
    stages = apart.stages()
    assert {s["placement"] for s in stages.values()} == {"local"}  # as the spec says; run by hand here
    assert stages["asr"]["load"]["decode_calls"] >= 1
    assert stages["tts"]["pid"] == apart.stage_procs["tts"].pid  # the stage processes started above
    health = apart.health()
    assert health["pipeline"]["session_slots"] == 8


async def test_a_restarted_coordinator_gets_its_stages_back_and_sessions_go_on(apart) -> None:
    apart.wait(all_alive)
    epoch = apart.pipeline_view()["epoch"]
    async with client(apart.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        assert (await turn(events, conn, "What is the weather like today?", 1)).response.status == "completed"

        assert apart.coordinator is not None
        apart.coordinator.send_signal(signal.SIGKILL)
        apart.coordinator.wait(10)
        apart.start_coordinator()  # the same port, a new process (and epoch)

        def back() -> bool:
            view = apart.pipeline_view()
            stages = apart.stages()
            return (
                view.get("epoch") not in (None, epoch)
                and len(stages) == 3
                and all(s["alive"] for s in stages.values())
            )

        deadline = time.monotonic() + 60
        while not back():
            assert time.monotonic() < deadline, apart.pipeline_view()
            await asyncio.sleep(0.2)
        # the very same stage processes registered again: nothing was restarted
        stages = apart.stages()
        assert {n: s["pid"] for n, s in stages.items()} == {n: p.pid for n, p in apart.stage_procs.items()}
        assert all(p.poll() is None for p in apart.stage_procs.values())

        # the open session hears of the lost hearing as an error, then its next turns are served
        await stream(conn, np.concatenate([speech("Hello there."), silence(1.5)]), speed=1)
        codes = [e.error.code for e in events.of("error")]
        assert codes and set(codes) <= {"stage_lost", "stage_unavailable"}
        done = None
        for _ in range(3):
            count = len(events.of("response.done")) + 1
            done = await turn(events, conn, "Tell me about the river.", count)
            if "river" in done.response.output[0].content[0].transcript.lower():
                break
        await events.stop()
    assert done is not None and done.response.status == "completed"
    assert "river" in done.response.output[0].content[0].transcript.lower()
