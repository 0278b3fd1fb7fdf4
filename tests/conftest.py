import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# tests/cluster.py and other shared helpers import as plain modules
sys.path.insert(0, str(Path(__file__).parent))

from fake_openai_service import FakeOpenAIService
from redis_server import RedisServer, redis_server

# No timing assertions in tests: hypothesis's per-example deadline (200 ms) fails a property test
# whenever the machine is busy, which says nothing about the property.
settings.register_profile("omnivox", deadline=None)
settings.load_profile("omnivox")


@pytest.fixture(scope="session")
def redis_db() -> Iterator[RedisServer]:
    """One real redis-server for the whole run, started on first use (tests keep apart by key
    prefix)."""
    with redis_server() as server:
        yield server


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeOpenAIService]:
    """The scripted OpenAI-compatible LLM (``fake_openai_service``), one per test module."""
    service = FakeOpenAIService().start()
    yield service
    service.stop()
