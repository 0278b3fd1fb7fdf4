"""A client WebSocket with structured concurrency: a receive task, an emit task, one owner.

The receive task parses frames into protocol messages. Bad frames are answered with an ``error``
right there (the connection stays usable unless the error is fatal); good ones go to the inbox.
``gone`` is set when the client disconnects or asks to close, so a session waiting in the queue can
notice without consuming messages meant for later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect
from pydantic import TypeAdapter

from omnivox.core.errors import OmnivoxError
from omnivox.protocol.wire import frames, parse

log = logging.getLogger(__name__)


class Disconnected:
    """Inbox sentinel: the client is gone."""


DISCONNECTED = Disconnected()


class ClientConnection:
    def __init__(
        self,
        ws: WebSocket,
        adapter: TypeAdapter[Any],
        tags: frozenset[str],
        max_bytes: int,
        on_error: Callable[[str], None] = lambda code: None,
        is_close: Callable[[Any], bool] = lambda msg: False,
    ) -> None:
        self.ws = ws
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.gone = asyncio.Event()
        self._outbox: asyncio.Queue[tuple[dict[str, Any] | None, int]] = asyncio.Queue()
        self._adapter = adapter
        self._tags = tags
        self._max_bytes = max_bytes
        self._on_error = on_error
        self._is_close = is_close
        self._tasks: list[asyncio.Task[None]] = []
        self.closed = False

    async def __aenter__(self) -> ClientConnection:
        self._tasks = [
            asyncio.create_task(self._receive(), name="receive"),
            asyncio.create_task(self._emit(), name="emit"),
        ]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
        emit = self._tasks[1]
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(emit), 2.0)  # flush what is queued
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def send(self, payload: dict[str, Any]) -> None:
        """Queue a message for the client (never blocks; the emit task writes in order)."""
        if not self.closed:
            self._outbox.put_nowait((payload, 0))

    def error(self, err: OmnivoxError) -> None:
        self._on_error(err.code)
        self.send(err.to_payload())
        if err.fatal:
            self.close(err.close_code)

    def close(self, code: int = 1000) -> None:
        if not self.closed:
            self.closed = True
            self._outbox.put_nowait((None, code))
            self.gone.set()

    async def next(self) -> Any:
        """The next parsed message, or DISCONNECTED."""
        return await self.inbox.get()

    async def _receive(self) -> None:
        try:
            async for raw in frames(self.ws):
                try:
                    msg = parse(self._adapter, raw, max_bytes=self._max_bytes, tags=self._tags)
                except OmnivoxError as err:
                    self.error(err)
                    continue
                if self._is_close(msg):
                    self.gone.set()
                self.inbox.put_nowait(msg)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            self.gone.set()
            self.inbox.put_nowait(DISCONNECTED)

    async def _emit(self) -> None:
        try:
            while True:
                payload, code = await self._outbox.get()
                if payload is None:
                    await self.ws.close(code)
                    return
                await self.ws.send_json(payload)
        except Exception as exc:  # the client vanished; the receive task reports it
            log.debug("emit stopped: %s", exc)
            self.gone.set()
