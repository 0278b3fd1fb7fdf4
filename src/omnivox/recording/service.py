"""The recorder of one gateway: a tap per session, a few writer threads shared by all of them.

The relay's taps run on the event loop; a ``SessionRecorder`` (the recording tap) only appends the
frame to its session's queue and returns. Reading frames, decoding audio and writing files happen on
``threads`` writer threads (4, as in the MiniCPM-o demo). Each session's frames are handled in order by one
thread at a time (a session's "strand"), so its files are written in order; different sessions are
written in parallel.

Everything waiting to be written, all sessions together, is bounded by ``queue_bytes``: when the
disk cannot keep up, frames with audio or images in them are dropped (and counted: a metric, and
``dropped_frames`` / ``incomplete`` in the session's meta.json), never queued without bound and
never waited for. Small frames (turns, text, errors) still go in, up to twice the bound, so the
timeline stays whole as long as anything can be kept.

A write that fails stops that session's recording; failures are counted once per session, and
logged at most once a minute (a full disk must not flood the log).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from omnivox.connection.taps import Direction, Frame
from omnivox.protocol.timelines.reader import TimelineReader
from omnivox.recording.session import Outcome, Policy, RecordedSession, SessionRecording
from omnivox.recording.store import RecordingStore

log = logging.getLogger(__name__)

SMALL_FRAME = 4096  # bytes: a frame this small carries no audio worth dropping first
_LOG_EVERY_S = 60.0


class RecordingService:
    def __init__(
        self,
        store: RecordingStore,
        policy: Policy,
        *,
        queue_bytes: int = 64 * 2**20,
        threads: int = 4,
        on_dropped: Callable[[int], None] = lambda n: None,
        on_failed: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.policy = policy
        self.queue_bytes = queue_bytes
        self.on_dropped = on_dropped
        self.on_failed = on_failed
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="recording")
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self.queued = 0  # bytes waiting, all sessions
        self._strands: set[_Strand] = set()
        self._logged_at = -_LOG_EVERY_S
        self._unlogged = 0
        self.failures = 0

    @property
    def records_anything(self) -> bool:
        return self.policy.default or self.policy.allow_opt_in

    def recorder(self, info: RecordedSession, reader: TimelineReader | None) -> SessionRecorder | None:
        """A recording tap for a new session (None: this server records none of its kind)."""
        if reader is None or not self.records_anything:
            return None
        recording = SessionRecording(self.store, info, reader, self.policy, on_failure=self._failed)
        strand = _Strand(self, recording)
        with self._lock:
            self._strands.add(strand)
        return SessionRecorder(strand)

    def close(self, timeout_s: float = 30.0) -> bool:
        """Wait (bounded) for every session's recording to be finished, then stop the threads.
        Blocking: call it from a thread. Returns whether everything was finished."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self._strands and (left := deadline - time.monotonic()) > 0:
                self._idle.wait(left)
            finished = not self._strands
        self._pool.shutdown(wait=finished, cancel_futures=not finished)
        return finished

    def live(self) -> set[str]:
        """Ids of the recordings being made now."""
        with self._lock:
            return {s.recording.recording_id for s in self._strands if s.recording.recording_id}

    def _failed(self, recording_id: str, why: BaseException | str) -> None:
        self.on_failed()
        now = time.monotonic()
        with self._lock:
            self.failures += 1
            if now - self._logged_at < _LOG_EVERY_S:
                self._unlogged += 1
                return
            self._logged_at, skipped, self._unlogged = now, self._unlogged, 0
        more = f" ({skipped} more sessions failed since the last report)" if skipped else ""
        log.error("recording of session %s stopped: %s%s; the session goes on", recording_id, why, more)


class _Strand:
    """One session's queue of work, handled in order by one writer thread at a time."""

    def __init__(self, service: RecordingService, recording: SessionRecording) -> None:
        self.service = service
        self.recording = recording
        self.items: deque[tuple[tuple[Any, ...], int]] = deque()
        self.scheduled = False

    def push(self, item: tuple[Any, ...], size: int, droppable: bool) -> bool:
        svc = self.service
        with svc._lock:
            if droppable:
                limit = svc.queue_bytes if size > SMALL_FRAME else 2 * svc.queue_bytes
                if svc.queued + size > limit:
                    return False
            svc.queued += size
            self.items.append((item, size))
            start = not self.scheduled
            self.scheduled = True
        if start:
            svc._pool.submit(self._drain)
        return True

    def _drain(self) -> None:
        svc = self.service
        while True:
            with svc._lock:
                if not self.items:
                    self.scheduled = False
                    return
                batch = list(self.items)
                self.items.clear()
            for item, size in batch:
                try:
                    self._handle(item)
                except Exception:
                    log.exception("recording %s: handling a frame failed", self.recording.info.session_id)
                finally:
                    with svc._lock:
                        svc.queued -= size
            self.recording.flush()

    def _handle(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "frame":
            self.recording.frame(item[1], item[2], item[3])
        elif kind == "assigned":
            self.recording.assigned(item[1], item[2], item[3])
        elif kind == "error":
            self.recording.gateway_error(item[1], item[2])
        elif kind == "finish":
            try:
                self.recording.finish(item[1])
            finally:
                with self.service._idle:
                    self.service._strands.discard(self)
                    self.service._idle.notify_all()


class SessionRecorder:
    """The recording tap of one session (event-loop side: nothing here blocks or waits)."""

    def __init__(self, strand: _Strand) -> None:
        self._strand = strand
        self.dropped = 0
        self._finished = False

    async def see(self, frame: Frame) -> None:
        self.see_now(frame)

    def see_now(self, frame: Frame) -> None:
        if self._finished:
            return
        item = ("frame", frame.at, frame.direction is Direction.TO_WORKER, frame.data)
        if not self._strand.push(item, len(frame.data), droppable=True):
            self.dropped += 1
            self._strand.service.on_dropped(1)

    def assigned(self, worker_id: str, engine: str) -> None:
        """The session was given a worker (a turn-based session may have one per turn)."""
        self._strand.push(("assigned", time.monotonic(), worker_id, engine), 0, droppable=False)

    def error(self, code: str) -> None:
        """The gateway reported an error to the client (one the worker's frames do not carry)."""
        self._strand.push(("error", time.monotonic(), code), 0, droppable=False)

    def finish(self, close_code: int | None, client_left: bool) -> None:
        """The session is over; its recording is finalized on a writer thread."""
        if self._finished:
            return
        self._finished = True
        outcome = Outcome(close_code=close_code, client_left=client_left, dropped_frames=self.dropped)
        self._strand.push(("finish", outcome), 0, droppable=False)
