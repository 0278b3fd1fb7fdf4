"""The recorder never waits and never holds more than its bound: frames beyond it are dropped and
counted; each session is written in order; failures are logged at most once a minute."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

import numpy as np

from omnivox.audio.pcm import float32_to_b64
from omnivox.connection.taps import Direction, Frame
from omnivox.protocol.registry import by_name
from omnivox.protocol.timelines.reader import TimelineReader
from omnivox.recording.service import SMALL_FRAME, RecordingService
from omnivox.recording.session import Policy, RecordedSession
from omnivox.recording.store import RecordingStore


class Gate(TimelineReader):
    """The duplex reader, held up until the test opens the gate (a disk that cannot keep up)."""

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate
        self.inner = by_name("duplex").timeline_reader()

    def read(self, from_client, data):
        self.gate.wait(10)
        return self.inner.read(from_client, data)

    def client(self, kind, msg):  # pragma: no cover - read() is overridden
        return []

    server = client


def info(session_id: str) -> RecordedSession:
    return RecordedSession(session_id, "duplex", "audio_duplex", time.time(), time.monotonic())


CHUNK = json.dumps({"type": "audio_chunk", "audio_base64": float32_to_b64(np.full(16000, 0.1, np.float32))})


def test_a_disk_that_cannot_keep_up_costs_frames_never_waiting(tmp_path):
    dropped = []
    service = RecordingService(
        RecordingStore(tmp_path),
        Policy(True),
        queue_bytes=len(CHUNK) * 3,
        threads=1,
        on_dropped=dropped.append,
    )
    gate = threading.Event()
    recorder = service.recorder(info("slow"), Gate(gate))
    start = time.perf_counter()
    for _ in range(10):
        recorder.see_now(Frame(Direction.TO_WORKER, time.monotonic(), CHUNK))
    small = json.dumps({"type": "pause"})
    for _ in range(10):
        recorder.see_now(Frame(Direction.TO_WORKER, time.monotonic(), small))
    assert time.perf_counter() - start < 0.5  # never waited for the writer
    assert recorder.dropped == len(dropped) > 0 and sum(dropped) == recorder.dropped
    assert service.queued <= 2 * service.queue_bytes
    kept_big = 10 - recorder.dropped
    assert kept_big <= 4  # one being handled, the bound's worth waiting
    gate.set()
    recorder.finish(1000, client_left=False)
    assert service.close(10)
    meta = json.loads((tmp_path / "slow" / "meta.json").read_text())
    assert meta["dropped_frames"] == recorder.dropped and meta["incomplete"] is True
    assert meta["files"]["user_audio"] == kept_big
    assert service.queued == 0


def test_small_frames_still_go_in_while_big_ones_are_dropped(tmp_path):
    service = RecordingService(RecordingStore(tmp_path), Policy(True), queue_bytes=len(CHUNK) * 2, threads=1)
    gate = threading.Event()
    recorder = service.recorder(info("mixed"), Gate(gate))
    for _ in range(4):
        recorder.see_now(Frame(Direction.TO_WORKER, time.monotonic(), CHUNK))
    before = recorder.dropped
    recorder.see_now(Frame(Direction.TO_WORKER, time.monotonic(), "x" * (SMALL_FRAME - 1)))
    assert recorder.dropped == before  # under twice the bound: kept
    gate.set()
    recorder.finish(None, client_left=True)
    assert service.close(10)


def test_sessions_are_written_in_parallel_each_in_order(tmp_path):
    service = RecordingService(RecordingStore(tmp_path), Policy(True), threads=4)
    recorders = [service.recorder(info(f"s{i}"), by_name("duplex").timeline_reader()) for i in range(6)]
    t0 = time.monotonic()
    for n in range(5):
        for i, rec in enumerate(recorders):
            level = 0.05 * (n + 1)
            msg = json.dumps(
                {"type": "audio_chunk", "audio_base64": float32_to_b64(np.full(16000, level, np.float32))}
            )
            rec.see_now(Frame(Direction.TO_WORKER, t0 + n + 1 + i / 100, msg))
    for rec in recorders:
        rec.finish(1000, client_left=False)
    assert service.close(20) and service.live() == set()
    from omnivox.audio.wav import read_wav

    for i in range(6):
        levels = [
            float(np.abs(read_wav(tmp_path / f"s{i}" / "user_audio" / f"{n:06d}.wav")[0]).mean())
            for n in range(1, 6)
        ]
        assert np.allclose(levels, [0.05, 0.1, 0.15, 0.2, 0.25], atol=1e-3)  # in the order they came


def test_failures_are_counted_per_session_and_logged_once_a_minute(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    failed = []
    service = RecordingService(
        RecordingStore(blocker / "s"), Policy(True), on_failed=lambda: failed.append(1)
    )
    with caplog.at_level(logging.ERROR, logger="omnivox.recording.service"):
        for i in range(4):
            rec = service.recorder(info(f"f{i}"), by_name("duplex").timeline_reader())
            for _ in range(3):
                rec.see_now(Frame(Direction.TO_WORKER, time.monotonic(), CHUNK))
            rec.finish(1000, client_left=False)
        assert service.close(10)
    assert len(failed) == 4 and service.failures == 4
    assert len([r for r in caplog.records if "recording of session" in r.message]) == 1


def test_a_server_that_records_nothing_makes_no_tap(tmp_path):
    assert (
        RecordingService(RecordingStore(tmp_path), Policy(False)).recorder(
            info("x"), by_name("duplex").timeline_reader()
        )
        is None
    )
    service = RecordingService(RecordingStore(tmp_path), Policy(False, allow_opt_in=True))
    assert service.recorder(info("x"), None) is None
    assert service.recorder(info("x"), by_name("duplex").timeline_reader()) is not None


async def test_the_tap_returns_at_once_on_the_event_loop(tmp_path):
    service = RecordingService(RecordingStore(tmp_path), Policy(True), threads=1)
    gate = threading.Event()
    recorder = service.recorder(info("loop"), Gate(gate))
    start = time.perf_counter()
    for _ in range(50):
        await recorder.see(Frame(Direction.TO_WORKER, time.monotonic(), CHUNK))
    assert time.perf_counter() - start < 0.2
    gate.set()
    recorder.finish(1000, client_left=False)
    assert await asyncio.to_thread(service.close, 10)
