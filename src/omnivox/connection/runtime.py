"""One connection's runtime: structured concurrency and the one place errors reach the peer.

``Connection.run`` holds one TaskGroup for the connection's life:
- receive: reads frames and hands each to the session's ``on_frame``; an ``OmnivoxError`` it raises
  becomes the protocol's error message, anything else is a server fault (error, then close 1011);
- emit: writes the outbox in order (see ``connection.outbox``); a peer that stops reading (one write
  blocked for ``slow_peer_s``, or more than ``outbox_limit_bytes`` waiting) is disconnected with
  1008 rather than queued for without bound;
- main (optional): the session's own loop (a gateway's admission and relay, a worker's hearing);
- the supervisor (the group's body): waits for the end, lets the last words out (bounded), closes
  with the right code, and cancels the rest.

The connection ends when the peer goes, when ``end(code)`` is called, when a fatal error is reported,
or when ``main`` returns. Then every task and work unit is cancelled (units with a timeout), so
nothing the connection started outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from omnivox.connection.outbox import Outbox
from omnivox.connection.sockets import PeerGone, Socket
from omnivox.connection.units import WorkUnits
from omnivox.core.errors import (
    WS_NORMAL,
    WS_SERVER_ERROR,
    InternalError,
    OmnivoxError,
    SlowClient,
    as_omnivox_error,
)

log = logging.getLogger(__name__)

OnFrame = Callable[[str | bytes], Awaitable[None]]


class Wording(Protocol):
    """How the connection's protocol words an error, and which code it reports it under."""

    def error_frame(self, err: OmnivoxError, event_id: str | None = None) -> str: ...

    def error_code(self, err: OmnivoxError) -> str: ...


class Connection:
    def __init__(
        self,
        socket: Socket,
        wording: Wording,
        *,
        on_error: Callable[[str], None] | None = None,
        outbox_limit: int = 256,
        flush_timeout_s: float = 2.0,
        cancel_timeout_s: float = 2.0,
        outbox_limit_bytes: int | None = None,
        slow_peer_s: float | None = None,
    ) -> None:
        self.socket = socket
        self.wording = wording
        self.outbox = Outbox(outbox_limit)
        self.units = WorkUnits(self._unit_failed, cancel_timeout_s)
        self.gone = asyncio.Event()  # the peer went (or stopped reading our frames)
        self.close_code: int | None = None  # the code the connection is closed with (None: peer went)
        self._on_error = on_error
        self._flush_timeout_s = flush_timeout_s
        self._outbox_limit_bytes = outbox_limit_bytes
        self._slow_peer_s = slow_peer_s
        self._end = asyncio.Event()

    # ---- what sessions call

    @property
    def ending(self) -> bool:
        return self._end.is_set()

    def send(self, frame: str | bytes, *, tag: str | None = None, weight: float = 0.0) -> None:
        """Queue a frame for the peer (never blocks; the emit task writes in order)."""
        if self.gone.is_set():
            return  # nobody reads it any more (gone, or too slow to keep)
        if not self._end.is_set() or self.close_code is not None:
            self.outbox.put(frame, tag=tag, weight=weight)
            if self._outbox_limit_bytes is not None and self.outbox.bytes > self._outbox_limit_bytes:
                self._too_slow(f"{self.outbox.bytes} bytes are waiting for it")

    async def send_wait(self, frame: str | bytes) -> None:
        """Queue a frame, waiting while the outbox is full (relays: a slow reader slows the source)."""
        if self.gone.is_set():
            return
        await self.outbox.put_wait(frame)

    def error(self, err: OmnivoxError, event_id: str | None = None, *, keep_open: bool = False) -> None:
        """Report ``err`` to the peer in its protocol's words; a fatal one then ends the connection
        (unless ``keep_open``: a fault the session has already recovered from, e.g. a failed turn)."""
        if self._on_error is not None:
            self._on_error(self.wording.error_code(err))
        self.send(self.wording.error_frame(err, event_id))
        if err.fatal and not keep_open:
            self.end(err.close_code)

    def end(self, code: int | None = WS_NORMAL) -> None:
        """End the connection: what is queued goes out (bounded), then it closes with ``code``
        (None: the peer is gone, nothing to close). The first call decides the code."""
        if not self._end.is_set():
            self.close_code = code
            self._end.set()

    async def ended(self) -> None:
        await self._end.wait()

    # ---- the runtime

    async def run(self, on_frame: OnFrame, main: Coroutine[Any, Any, None] | None = None) -> None:
        """Serve the connection until it ends; returns once everything it started has stopped.

        The body of the task group is the supervisor: it waits for the end, lets the last words out,
        closes, then cancels the group's tasks. No task ends the group by raising, so a cancellation
        from outside (server shutdown) reaches the caller as it came."""
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [
                    tg.create_task(self._receive(on_frame), name="receive"),
                    tg.create_task(self._emit(), name="emit"),
                ]
                if main is not None:
                    tasks.append(tg.create_task(self._main(main), name="main"))
                await self._end.wait()
                if self.close_code is not None:
                    if not self.gone.is_set():
                        await self.outbox.drain(self._flush_timeout_s)
                    with contextlib.suppress(TimeoutError):  # a peer that reads nothing takes no close
                        async with asyncio.timeout(self._flush_timeout_s):
                            await self.socket.close(self.close_code)
                for task in tasks:
                    task.cancel()
        finally:
            if main is not None:
                main.close()  # never started if the connection ended first: no "never awaited" warning
            await self.units.close()

    async def _receive(self, on_frame: OnFrame) -> None:
        while (frame := await self.socket.receive()) is not None:
            try:
                await on_frame(frame)
            except OmnivoxError as err:
                self.error(err, _event_id(err))
            except Exception as exc:
                log.exception("handling a frame failed")
                self.error(InternalError(f"the server failed to handle a message: {type(exc).__name__}"))
        self.gone.set()
        self.end(None)

    async def _emit(self) -> None:
        while True:
            out = await self.outbox.get()
            try:
                async with asyncio.timeout(self._slow_peer_s):
                    await self.socket.send(out.frame)
            except PeerGone:
                self.gone.set()
                self.end(None)
                return
            except TimeoutError:
                self._too_slow(f"one frame could not be written for {self._slow_peer_s} s")
                return
            self.outbox.done()

    def _too_slow(self, why: str) -> None:
        """The peer stopped reading: close it (1008) instead of holding its frames without bound."""
        if self.ending:
            return
        err = SlowClient(f"the peer is not reading: {why}")
        log.warning("%s", err.message)
        if self._on_error is not None:
            self._on_error(self.wording.error_code(err))
        self.gone.set()  # nothing more can be written to it: close without flushing
        self.end(err.close_code)

    async def _main(self, main: Coroutine[Any, Any, None]) -> None:
        try:
            await main
        except OmnivoxError as err:
            self.error(err)
            self.end(err.close_code)
        except Exception as exc:
            log.exception("session failed")
            self.error(as_omnivox_error(exc))
            self.end(WS_SERVER_ERROR)
        self.end(WS_NORMAL)

    def _unit_failed(self, name: str, exc: BaseException) -> None:
        log.error("unit %s failed", name, exc_info=exc)
        self.error(as_omnivox_error(exc))


def _event_id(err: OmnivoxError) -> str | None:
    ref = err.details.get("event_id")
    return ref if isinstance(ref, str) else None
