"""The duplex unit loop (MiniCPM-o's full-duplex loop): hear -> decide -> result -> finalize, one
unit at a time.

Chunks arrive from the client (``push``); the loop takes what is waiting and has its ``UnitSource``
decide one unit on it: listen, or speak (with the audio the unit carries), then the result goes to
the client. Two sources decide units: a model that decides each unit itself (``ModelUnits``: the
engine's ``duplex`` role, ``engines.duplex``, in the engine's thread), or the voice agent over
the engine's voice models (``worker.duplex.agent_units``). ``finalize`` closes the unit: with
deferred finalize (the default) it runs after the result is sent, overlapping the network, and the
next unit's prefill waits on it (the barrier); without, it runs before the result is sent.

Units run strictly in order. If chunks arrive faster than units finish, the loop does not fall
further and further behind: everything waiting is merged into the next unit (its result says
``lagging`` and how many chunks it heard), and audio beyond ``max_lag_ms`` is dropped, oldest first,
and counted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from omnivox.audio.pcm import pcm16_to_b64
from omnivox.core.errors import OmnivoxError, WorkerUnavailable
from omnivox.engines.duplex import INPUT_SAMPLE_RATE, DuplexModel, DuplexParams, DuplexReady, DuplexUnit
from omnivox.protocol.duplex import Result
from omnivox.worker.duplex.inputs import Chunk, merge
from omnivox.worker.host import EngineHost

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UnitSettings:
    deferred_finalize: bool = True
    force_listen_count: int = 3  # the first units always listen
    max_lag_ms: int = 5000  # audio waiting beyond this is dropped
    generate_audio: bool = True


@dataclass(frozen=True)
class UnitCosts:
    """One unit's decision and what it cost."""

    unit: DuplexUnit
    prefill_ms: float
    generate_ms: float
    finalize_ms: float  # 0 when deferred
    kv_length: int


class UnitSource(Protocol):
    """What decides each unit of a duplex session (see the module docstring)."""

    async def prepare(self, params: DuplexParams) -> DuplexReady:
        """Start the session (its prompt and settings)."""
        ...

    async def step(self, chunk: Chunk, force_listen: bool, finalize: bool) -> UnitCosts:
        """Hear ``chunk`` and decide its unit (and close it too, with ``finalize``)."""
        ...

    async def finalize(self) -> float:
        """Close the last unit; returns what it took (ms)."""
        ...

    async def cleanup(self) -> None:
        """End the session however it ended; safe to call twice or without a prepare."""
        ...


class ModelUnits:
    """Units a duplex model decides itself, in the engine's thread (``engines.duplex``)."""

    def __init__(self, host: EngineHost) -> None:
        self.host = host

    @property
    def model(self) -> DuplexModel:
        model = self.host.engine.duplex
        if model is None:
            raise WorkerUnavailable(f"engine {self.host.engine.name} cannot serve duplex sessions")
        return model

    async def prepare(self, params: DuplexParams) -> DuplexReady:
        ready: DuplexReady = await self.host.call(self.model.prepare, params)
        return ready

    async def step(self, chunk: Chunk, force_listen: bool, finalize: bool) -> UnitCosts:
        costs: UnitCosts = await self.host.call(self._compute, chunk, force_listen, finalize)
        return costs

    async def finalize(self) -> float:
        ms: float = await self.host.call(self._finalize)
        return ms

    async def cleanup(self) -> None:
        try:
            await self.host.call(self.model.cleanup)
        except WorkerUnavailable:
            pass  # an engine without duplex never prepared one
        except Exception:
            log.exception("duplex cleanup failed")

    # ---- in the engine's thread

    def _compute(self, chunk: Chunk, force_listen: bool, finalize: bool) -> UnitCosts:
        model = self.model
        t0 = time.perf_counter()
        model.prefill(chunk.audio, chunk.frames)
        t1 = time.perf_counter()
        unit = model.generate(force_listen)
        t2 = time.perf_counter()
        finalize_ms = self._finalize() if finalize else 0.0
        return UnitCosts(unit, (t1 - t0) * 1000, (t2 - t1) * 1000, finalize_ms, model.kv_length)

    def _finalize(self) -> float:
        t0 = time.perf_counter()
        self.model.finalize()
        return (time.perf_counter() - t0) * 1000


class UnitLoop:
    def __init__(
        self,
        source: UnitSource,
        send: Callable[[Result], None],
        report: Callable[[OmnivoxError], None],
        settings: UnitSettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.send = send
        self.report = report  # a unit's recoverable failure: said, and the loop goes on
        self.settings = settings
        self.clock = clock
        self.units = 0  # units run
        self.lagging_units = 0  # units that heard more than one chunk
        self.dropped_ms = 0.0  # audio dropped because the loop fell too far behind
        self.heard_samples = 0  # 16 kHz samples heard so far
        self._waiting: list[Chunk] = []
        self._arrived = asyncio.Event()
        self._finalizing: asyncio.Future[float] | None = None
        self._last_finalize_ms = 0.0

    def push(self, chunk: Chunk) -> None:
        """A chunk for a coming unit (never blocks; the loop merges what piles up)."""
        self._waiting.append(chunk)
        self._arrived.set()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def run(self) -> None:
        """Run units until cancelled."""
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            if not self._waiting:
                continue
            chunks, self._waiting = self._waiting, []
            chunk, dropped = merge(chunks, self.settings.max_lag_ms * INPUT_SAMPLE_RATE // 1000)
            self.dropped_ms += dropped * 1000 / INPUT_SAMPLE_RATE
            try:
                await self.unit(chunk)
            except OmnivoxError as err:
                if err.fatal:
                    raise
                self.report(err)

    async def unit(self, chunk: Chunk) -> None:
        await self.barrier()
        index = self.units
        self.units += 1
        if chunk.merged > 1:
            self.lagging_units += 1
        force = chunk.force_listen or index < self.settings.force_listen_count
        costs = await self.source.step(chunk, force, finalize=not self.settings.deferred_finalize)
        self.heard_samples += len(chunk.audio)
        unit = costs.unit
        result = Result(
            unit_index=index,
            is_listen=unit.is_listen,
            text=unit.text,
            end_of_turn=unit.end_of_turn,
            current_time=round(self.heard_samples / INPUT_SAMPLE_RATE, 3),
            cost_prefill_ms=round(costs.prefill_ms, 3),
            cost_generate_ms=round(costs.generate_ms, 3),
            cost_finalize_ms=round(costs.finalize_ms or self._last_finalize_ms, 3),
            wall_clock_ms=0.0,
            kv_cache_length=costs.kv_length,
            lagging=chunk.merged > 1,
            merged_chunks=chunk.merged,
        )
        if self.settings.generate_audio and unit.audio is not None and len(unit.audio):
            result.audio_data = pcm16_to_b64(unit.audio)
        result.wall_clock_ms = round((self.clock() - chunk.arrived) * 1000, 3)
        self.send(result)
        if self.settings.deferred_finalize:
            self._finalizing = asyncio.ensure_future(self.source.finalize())

    async def barrier(self) -> None:
        """Wait until the previous unit's deferred finalize is done."""
        if self._finalizing is not None:
            pending, self._finalizing = self._finalizing, None
            self._last_finalize_ms = await pending

    async def close(self) -> None:
        """Let a finalize still in flight finish (the engine thread runs it anyway)."""
        if self._finalizing is not None:
            await asyncio.gather(self._finalizing, return_exceptions=True)
            self._finalizing = None
