"""Worker side of turn-based streaming: one WebSocket from the gateway, prefill -> generate -> done.

The receive loop and the generation run side by side, so ``stop`` (or a vanished peer) reaches the
engine within one chunk. The host is held from the first ``prefill`` to the end of the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect

from omnivox.audio.pcm import pcm16_to_b64
from omnivox.core.errors import (
    GenerationInProgress,
    OmnivoxError,
    PrefillRequired,
    as_omnivox_error,
)
from omnivox.engines.base import OUTPUT_SAMPLE_RATE, GenerateParams, GenResult, PrefillStats
from omnivox.protocol import streaming as sp
from omnivox.protocol.chat import history_hash
from omnivox.protocol.wire import parse
from omnivox.protocol.workers import WorkerState
from omnivox.worker.host import EngineHost

log = logging.getLogger(__name__)


class StreamingConnection:
    def __init__(self, ws: WebSocket, host: EngineHost, max_message_bytes: int, max_new_tokens: int) -> None:
        self.ws = ws
        self.host = host
        self.max_message_bytes = max_message_bytes
        self.max_new_tokens = max_new_tokens
        self.held = False
        self.prefilled = False
        self.generation: asyncio.Task[None] | None = None
        self.stop = threading.Event()
        self._input = PrefillStats(0, 0, 0, 0)
        self._send_lock = asyncio.Lock()

    async def send(self, payload: dict[str, Any]) -> None:
        async with self._send_lock:
            await self.ws.send_json(payload)

    async def run(self) -> None:
        try:
            while True:
                raw = await self.ws.receive_text()
                try:
                    msg = parse(
                        sp.CLIENT_ADAPTER, raw, max_bytes=self.max_message_bytes, tags=sp.CLIENT_TYPES
                    )
                    if not await self.handle(msg):
                        break
                except OmnivoxError as err:
                    await self.send(err.to_payload())
                    if err.fatal:
                        await self.ws.close(err.close_code)
                        return
        except WebSocketDisconnect:
            pass
        finally:
            await self.shutdown()

    async def handle(self, msg: Any) -> bool:
        """Handle one message; False ends the connection."""
        if isinstance(msg, sp.Prefill):
            if self.generation and not self.generation.done():
                raise GenerationInProgress("a generation is running; stop it or wait for done")
            await self.prefill(msg)
        elif isinstance(msg, sp.Generate):
            if self.generation and not self.generation.done():
                raise GenerationInProgress("a generation is already running")
            if not self.prefilled:
                raise PrefillRequired("send prefill before generate")
            self.prefilled = False
            self.stop = threading.Event()
            self.generation = asyncio.create_task(self.generate(msg), name="generate")
        elif isinstance(msg, sp.Stop):
            self.stop.set()
        elif isinstance(msg, sp.Close):
            return False
        return True

    async def prefill(self, msg: sp.Prefill) -> None:
        if not self.held:
            await self.host.acquire()
            self.held = True
            self.host.transition(WorkerState.BUSY_STREAMING)
        stats = await self.host.prefill(msg.messages, clear=msg.clear_kv_cache)
        self.prefilled = True
        await self.send(
            sp.PrefillDone(
                prompt_length=stats.prompt_length,
                message_count=stats.message_count,
                cached_tokens=stats.cached_tokens,
                input_tokens=stats.input_tokens,
                transcript=" ".join(t for t in stats.transcripts if t) if stats.transcripts else None,
            ).dump()
        )
        self._input = stats

    async def generate(self, msg: sp.Generate) -> None:
        params = GenerateParams(
            max_new_tokens=min(msg.max_new_tokens, self.max_new_tokens),
            temperature=msg.temperature,
            generate_audio=msg.generate_audio,
            voice=msg.voice,
        )
        result = GenResult()
        start = time.monotonic()
        ttft: float | None = None
        index = 0
        failure: OmnivoxError | None = None
        try:
            async for chunk in self.host.generate(params, self.stop, result):
                if ttft is None:
                    ttft = (time.monotonic() - start) * 1000
                out = sp.Chunk(chunk_index=index, text_delta=chunk.text_delta)
                if chunk.audio is not None and len(chunk.audio):
                    out.audio_data = pcm16_to_b64(chunk.audio)
                    out.audio_sample_rate = OUTPUT_SAMPLE_RATE
                await self.send(out.dump())
                index += 1
        except Exception as exc:  # an engine fault is reported, the worker keeps serving
            failure = as_omnivox_error(exc)
            if not isinstance(exc, OmnivoxError):
                log.exception("generation failed")
            await self.send(failure.to_payload())
        # done always ends a generation (after an error too), so the turn ends on both sides
        await self.send(sp.Chunk(chunk_index=index, is_final=True).dump())
        stats = self._input
        total = self.host.engine.kv_length
        done = sp.Done(
            elapsed_ms=round((time.monotonic() - start) * 1000, 3),
            stopped=result.stopped or failure is not None,
            error=failure.code if failure is not None else None,
            text=result.text,
            ttft_ms=round(ttft, 3) if ttft is not None else None,
            history_hash=history_hash(self.host.engine.held_messages()),
            token_stats=sp.TokenStats(
                cached_tokens=stats.cached_tokens,
                input_tokens=stats.input_tokens,
                generated_tokens=result.generated_tokens,
                total_tokens=total,
            ),
        )
        await self.send(done.dump())

    async def shutdown(self) -> None:
        """The connection is over: stop any generation, wait for the engine, free the host."""
        self.stop.set()
        if self.generation is not None:
            self.generation.cancel()  # host.generate waits for the engine thread as it unwinds
            with contextlib.suppress(BaseException):
                await self.generation
        if self.held:
            self.held = False
            await self.host.release()
        with contextlib.suppress(Exception):
            await self.ws.close()
