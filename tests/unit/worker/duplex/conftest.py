"""Duplex over voice models: the adapter under test, on the module's cascade ``engine``."""

from __future__ import annotations

import pytest

from omnivox.connection.units import WorkUnits
from omnivox.core.config import Settings
from omnivox.worker.duplex.agent_units import AgentUnits


@pytest.fixture
async def source(engine):
    """The agent deciding units over ``engine``'s voice models; no work unit may fail."""
    failures: list[BaseException] = []
    work = WorkUnits(lambda name, exc: failures.append(exc))
    units = AgentUnits(engine.voice, work, Settings())
    yield units
    await units.cleanup()
    await work.close()
    engine.end_session()
    assert failures == []
