"""The unit loop on its own: order, forced listening, the finalize barrier, merging, failures."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from fake_duplex_engine import FakeDuplexEngine
from omnivox.core.errors import EngineFailure, InvalidAudio, OmnivoxError
from omnivox.engines.duplex import DuplexParams
from omnivox.protocol.duplex import Result
from omnivox.worker.duplex.inputs import Chunk
from omnivox.worker.duplex.units import ModelUnits, UnitLoop, UnitSettings
from omnivox.worker.host import EngineHost


@pytest.fixture
async def host():
    engine = FakeDuplexEngine()
    h = EngineHost(engine)
    await h.load()
    await h.call(engine.duplex.prepare, DuplexParams())
    yield h
    await h.close()


def loop_for(host: EngineHost, **settings) -> tuple[UnitLoop, list[Result], list[OmnivoxError]]:
    results: list[Result] = []
    errors: list[OmnivoxError] = []
    loop = UnitLoop(ModelUnits(host), results.append, errors.append, UnitSettings(**settings))
    return loop, results, errors


def second() -> Chunk:
    return Chunk(np.zeros(16000, np.float32))


async def test_units_run_in_order_and_the_first_ones_listen(host) -> None:
    loop, results, _ = loop_for(host, force_listen_count=2)
    for _ in range(4):
        await loop.unit(second())
    await loop.close()
    assert [r.unit_index for r in results] == [0, 1, 2, 3]
    assert [r.is_listen for r in results] == [True, True, False, False]
    engine = host.engine
    assert isinstance(engine, FakeDuplexEngine)
    assert engine.names()[1:] == ["prefill", "generate", "finalize"] * 4


async def test_the_barrier_waits_for_the_previous_finalize(host) -> None:
    engine = host.engine
    assert isinstance(engine, FakeDuplexEngine)
    engine.finalize_s = 0.2
    loop, results, _ = loop_for(host)
    await loop.unit(second())
    assert loop._finalizing is not None and not loop._finalizing.done()
    await loop.barrier()
    assert engine.names()[-1] == "finalize"
    await loop.unit(second())
    assert results[1].cost_finalize_ms >= 150
    await loop.close()


async def test_run_merges_what_waits_and_reports_recoverable_failures(host) -> None:
    engine = host.engine
    assert isinstance(engine, FakeDuplexEngine)
    engine.fail_at = 0
    engine.fail_with = InvalidAudio("unhearable")
    loop, results, errors = loop_for(host)
    task = asyncio.create_task(loop.run())
    loop.push(second())
    await asyncio.sleep(0.1)
    loop.push(second())
    loop.push(second())
    for _ in range(50):
        if results:
            break
        await asyncio.sleep(0.02)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await loop.close()
    assert [e.code for e in errors] == ["invalid_audio"]
    assert results[0].merged_chunks == 2 and results[0].lagging and loop.lagging_units == 1


async def test_a_fatal_failure_ends_the_loop(host) -> None:
    engine = host.engine
    assert isinstance(engine, FakeDuplexEngine)
    engine.fail_at = 0
    engine.fail_with = EngineFailure("broken")
    loop, _, errors = loop_for(host)
    loop.push(second())
    with pytest.raises(EngineFailure):
        await asyncio.wait_for(loop.run(), 2)
    assert errors == []
