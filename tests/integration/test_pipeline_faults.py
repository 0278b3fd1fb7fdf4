"""The pipeline's faults on real stage processes over loopback (issue 15): each fault is data.

The coordinator runs on a thread of the test (so its view can be read); every stage is a real
``python -m omnivox stage`` process, started and restarted by ``LocalStages`` as ``omnivox
coordinator`` does it. No timing is asserted: waits are generous bounds on what must happen.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq

from omnivox.core.errors import OmnivoxError
from omnivox.pipeline.client import PipelineClient
from omnivox.pipeline.coordinator import Coordinator
from omnivox.pipeline.process import LocalStages, stage_command
from omnivox.pipeline.relay import PayloadRelay, segments
from omnivox.pipeline.spec import load_spec

SPEC = """
name = "faults"
[[stages]]
name = "first"
scheduler = "simple"
model = "noop"
next = ["slow"]

[[stages]]
name = "slow"
scheduler = "parallel"
model = "noop"
slots = 64
next = ["client"]
[stages.options]
sleep_ms = {sleep_ms}

[[stages]]
name = "ears"
scheduler = "streaming"
model = "echo"
slots = 4
next = ["client"]
stream = ["client"]

[[stages]]
name = "count"
scheduler = "ar"
model = "count"
batch = 4
next = ["client"]
stream = ["client"]
"""


def wait_for(what: Callable[[], object], timeout: float = 30.0, step: float = 0.05) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(step)
    raise TimeoutError("the condition never held")


class Harness:
    def __init__(
        self,
        tmp: Path,
        sleep_ms: int = 0,
        stage_env: dict[str, str] | None = None,
        lost_after_s: float = 30.0,
    ) -> None:
        self.lost_after_s = lost_after_s  # long by default: a killed stage is seen by its closed connection
        self.spec_path = tmp / "faults.toml"
        self.spec_path.write_text(SPEC.format(sleep_ms=sleep_ms))
        self.spec = load_spec(str(self.spec_path))
        self.port = 0
        self.env = {
            "OMNIVOX_PIPELINE_HEARTBEAT_S": "0.1",
            "OMNIVOX_LOG_LEVEL": "WARNING",
            **(stage_env or {}),
        }
        self.coordinator: Coordinator | None = None
        self.thread: threading.Thread | None = None
        self.clients: list[PipelineClient] = []
        self.start_coordinator()
        os.environ.update(self.env)  # the stage processes inherit it
        assert self.coordinator is not None
        self.stages = LocalStages(
            stage_command(str(self.spec_path), self.coordinator.address), self.spec.names
        )
        self.stages.start()
        self.wait_stages()

    def start_coordinator(self) -> None:
        deadline = time.monotonic() + 10
        while True:  # the old socket's port is released by ZeroMQ's own thread, a moment after close
            try:
                self.coordinator = Coordinator(
                    self.spec, port=self.port, heartbeat_s=0.1, lost_after_s=self.lost_after_s
                )
                break
            except zmq.ZMQError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.port = int(self.coordinator.address.rsplit(":", 1)[1])
        self.thread = threading.Thread(target=self.coordinator.run, daemon=True)
        self.thread.start()

    def stop_coordinator(self) -> None:
        assert self.coordinator is not None and self.thread is not None
        self.coordinator.stopping.set()
        self.thread.join(5)

    def wait_stages(self, names: list[str] | None = None) -> None:
        assert self.coordinator is not None
        coordinator = self.coordinator
        wait_for(lambda: all(n in coordinator.directory() for n in (names or self.spec.names)), timeout=60)

    def client(self, **kw) -> PipelineClient:
        assert self.coordinator is not None
        c = PipelineClient(self.coordinator.address, heartbeat_s=0.1, **kw)
        self.clients.append(c)
        assert c.wait_ready(10)
        return c

    def load(self, stage: str) -> dict[str, float]:
        assert self.coordinator is not None
        return self.coordinator.stages[stage].load

    def close(self) -> None:
        for c in self.clients:
            c.close()
        self.stages.stop()
        self.stop_coordinator()
        for key in self.env:
            os.environ.pop(key, None)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def start(**kw) -> Harness:
        h = Harness(tmp_path, **kw)
        made.append(h)
        return h

    yield start
    for h in made:
        h.close()


def result(request, timeout: float = 30.0):
    while True:
        event = request.next(timeout)
        assert event is not None, "no result in time"
        if event.kind == "result":
            return event


def error_code(request, timeout: float = 30.0) -> str:
    with pytest.raises(OmnivoxError) as info:
        result(request, timeout)
    return info.value.code


def test_a_killed_stage_fails_its_requests_and_serves_again_once_restarted(harness) -> None:
    h = harness(sleep_ms=60_000)
    client = h.client()
    in_flight = [client.submit({"n": i}, entries=["first"]) for i in range(5)]
    wait_for(lambda: h.load("slow").get("running", 0) >= 5)
    old_pid = h.stages.procs["slow"].pid
    os.kill(old_pid, signal.SIGKILL)
    assert [error_code(r) for r in in_flight] == ["stage_lost"] * 5
    # the supervisor restarts it; it registers as a new process and the next request goes through
    wait_for(lambda: h.stages.procs["slow"].pid != old_pid and "slow" in h.coordinator.directory())
    assert (
        result(client.submit({"again": True, "sleep_ms": 0}, entries=["first"]), timeout=60).values["again"]
        is True
    )
    assert h.coordinator.stages["slow"].lost >= 1


def test_aborts_of_unknown_or_finished_requests_are_harmless(harness) -> None:
    h = harness()
    client = h.client()
    done = client.submit({"x": 1}, entries=["first"])
    result(done)
    done.abort()
    client._post(__import__("omnivox.pipeline.messages", fromlist=["Abort"]).Abort("no-such-request"), [])
    assert result(client.submit({"y": 2}, entries=["first"])).values["y"] == 2


def test_a_stalled_stage_is_lost_then_taken_back_and_a_full_relay_is_an_error(harness) -> None:
    h = harness(lost_after_s=0.6)  # a stopped process keeps its connection: only heartbeats tell
    client = h.client(relay=PayloadRelay(capacity_bytes=1 << 20))
    request = client.submit({}, entries=["ears"])
    pid = h.stages.procs["ears"].pid
    os.kill(pid, signal.SIGSTOP)  # it stops reading and heartbeating
    try:
        with pytest.raises(OmnivoxError) as info:
            for _ in range(100):  # 100 x 200 KB of unread shared memory: more than 1 MB
                request.stream({"audio": np.zeros(50_000, np.float32)})
        assert info.value.code == "relay_full"
        assert error_code(request) == "stage_lost"
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: "ears" in h.coordinator.directory())  # it heartbeats again: re-registered
    again = client.submit({}, entries=["ears"])
    again.stream({"audio": np.ones(10, np.float32)})
    again.done()
    assert result(again).values == {"chunks": 1}
    assert h.stages.procs["ears"].pid == pid  # the same process, taken back
    wait_for(lambda: [s for s in segments() if s.startswith(f"ovx_{os.getpid()}_")] == [], timeout=10)


def test_oversized_payloads_are_refused_on_both_sides(harness) -> None:
    h = harness(stage_env={"OMNIVOX_RELAY_MAX_PAYLOAD_BYTES": "4096"})
    client = h.client(relay=PayloadRelay(max_payload_bytes=1 << 20))
    with pytest.raises(OmnivoxError) as info:
        client.submit({"big": np.zeros((1 << 20) + 1, np.uint8)}, entries=["first"])
    assert info.value.code == "payload_too_large"
    assert (
        error_code(client.submit({"mid": np.zeros(100_000, np.uint8)}, entries=["first"]))
        == "payload_too_large"
    )
    assert result(client.submit({"small": np.zeros(16, np.uint8)}, entries=["first"])).values[
        "small"
    ].shape == (16,)


def test_malformed_and_unknown_control_messages_are_dropped(harness) -> None:
    h = harness()
    ctx = zmq.Context.instance()
    rogue = ctx.socket(zmq.DEALER)
    rogue.setsockopt(zmq.LINGER, 0)
    rogue.connect(h.coordinator.address)
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.connect(h.coordinator.directory()["first"].address)
    import msgspec

    for garbage in (
        b"\xff\x00junk",
        msgspec.msgpack.encode({"type": "nuke"}),
        msgspec.msgpack.encode([1, 2]),
    ):
        rogue.send(garbage)
        push.send(garbage)
    rogue.send_multipart([msgspec.msgpack.encode({"type": "abort"}), b"extra"])
    wait_for(lambda: h.coordinator.counts["bad_messages"] >= 4)
    wait_for(lambda: h.load("first").get("bad_messages", 0) >= 3)
    rogue.close()
    push.close()
    assert result(h.client().submit({"still": "serving"}, entries=["first"])).values["still"] == "serving"


def test_a_restarted_coordinator_fails_what_was_in_flight_and_stages_register_again(harness) -> None:
    h = harness(sleep_ms=60_000)
    client = h.client()
    request = client.submit({"n": 1}, entries=["first"])
    wait_for(lambda: h.load("slow").get("running", 0) >= 1)
    h.stop_coordinator()
    h.start_coordinator()  # same port, new epoch
    assert error_code(request) == "stage_lost"
    h.wait_stages()
    wait_for(lambda: h.load("slow").get("running", 1) == 0)  # the stage aborted the stale request
    wait_for(client.ready.is_set)
    quick = client.submit({"q": 1}, entries=["count"])
    with pytest.raises(OmnivoxError):  # count needs tokens >= 1
        result(client.submit({"tokens": 0}, entries=["count"]))
    quick.abort()


def test_nothing_leaks_after_200_aborted_requests(harness) -> None:
    h = harness(sleep_ms=60_000)
    client = h.client()
    for i in range(200):
        which = i % 3
        if which == 0:
            r = client.submit(
                {"audio": np.zeros(20_000, np.float32)}, entries=["first"]
            )  # through first into slow
        elif which == 1:
            r = client.submit({}, entries=["ears"])
            r.stream({"audio": np.zeros(20_000, np.float32)})  # a slot and shared memory
        else:
            r = client.submit({"tokens": 100_000}, entries=["count"])  # a KV state
        r.abort()
    wait_for(lambda: client.in_flight() == 0)
    wait_for(
        lambda: (
            h.load("ears").get("slots_used", 1) == 0
            and h.load("count").get("kv_states", 1) == 0
            and h.load("slow").get("running", 1) == 0
            and not h.coordinator.requests
        ),
        timeout=60,
    )
    pids = {os.getpid(), *(p.pid for p in h.stages.procs.values())}
    wait_for(lambda: not [s for s in segments() if int(s.split("_")[1]) in pids], timeout=30)
    assert h.coordinator.counts["aborted"] == 200
    # and they all still serve
    ears = client.submit({}, entries=["ears"])
    ears.done()
    assert result(ears).values == {"chunks": 0}


def test_without_shared_memory_arrays_cross_processes_as_frames(harness) -> None:
    h = harness(stage_env={"OMNIVOX_RELAY_SHARED_MEMORY": "false"})
    client = h.client(relay=PayloadRelay(use_shm=False))
    audio = np.arange(200_000, dtype=np.float32)  # 800 KB, as if between two hosts
    got = result(client.submit({"audio": audio}, entries=["first"]))
    np.testing.assert_array_equal(got.values["audio"], audio)
    assert client.relay.segments_created == 0
    wait_for(lambda: h.load("slow").get("done", 0) >= 1)  # a heartbeat after the request
    assert h.load("first")["relay_segments"] == h.load("slow")["relay_segments"] == 0
