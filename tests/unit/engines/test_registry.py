"""Engines by name, and how many seats a worker process of each may host (``--seats``)."""

from __future__ import annotations

import pytest

from omnivox.core.config import Settings
from omnivox.engines.echo import EchoEngine
from omnivox.engines.pipeline import PipelineEngine, PipelineLink
from omnivox.engines.registry import build_seat_engines, seats_refusal


@pytest.mark.parametrize("engine", ["cascade", "local", "tiny", "transformers", "minicpmo"])
def test_engines_with_in_process_models_refuse_seats_and_say_what_to_do(engine: str) -> None:
    assert seats_refusal(engine, 1) is None  # one seat: the worker process it always was
    refusal = seats_refusal(engine, 4)
    assert refusal is not None and "--seats 4" in refusal and engine in refusal and "pipeline" in refusal
    with pytest.raises(ValueError, match="one session at a time"):
        build_seat_engines(Settings(engine=engine, seats=4, model="/nowhere"))


def test_echo_seats_are_engines_of_their_own() -> None:
    engines = build_seat_engines(Settings(engine="echo", seats=3))
    assert len(engines) == 3 and all(isinstance(e, EchoEngine) for e in engines)
    assert len({id(e) for e in engines}) == 3


def test_pipeline_seats_share_one_link_to_the_stages() -> None:
    settings = Settings(engine="pipeline", coordinator="tcp://127.0.0.1:1", seats=3)
    engines = build_seat_engines(settings)
    assert all(isinstance(e, PipelineEngine) for e in engines)
    seats = [e for e in engines if isinstance(e, PipelineEngine)]
    assert [e.seat for e in seats] == [0, 1, 2]
    assert len({id(e.link) for e in seats}) == 1  # one client, one smart-turn model for the process
    alone = build_seat_engines(settings.model_copy(update={"seats": 1}))
    assert len(alone) == 1 and isinstance(alone[0], PipelineEngine) and alone[0].seat is None


def test_a_pipeline_engine_needs_a_coordinator() -> None:
    with pytest.raises(ValueError, match="--coordinator"):
        build_seat_engines(Settings(engine="pipeline", seats=2))


class CountingClient:
    """Stands in for the pipeline's client (no stages run here): counts its closes."""

    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_the_shared_link_is_closed_by_the_last_seat_to_close_once(monkeypatch) -> None:
    client = CountingClient()
    monkeypatch.setattr(PipelineLink, "_connect", lambda link: client)
    settings = Settings(engine="pipeline", coordinator="tcp://127.0.0.1:1", seats=3)
    seats = [e for e in build_seat_engines(settings) if isinstance(e, PipelineEngine)]
    assert seats[0].link.connect() is client
    seats[0].close()
    seats[0].close()  # a second close of one seat is not another seat's
    seats[1].close()
    assert client.closed == 0  # seat 2 still talks to the stages
    seats[2].close()
    assert client.closed == 1


def test_a_pipeline_engine_of_its_own_closes_its_link(monkeypatch) -> None:
    client = CountingClient()
    monkeypatch.setattr(PipelineLink, "_connect", lambda link: client)
    engine = PipelineEngine(Settings(engine="pipeline", coordinator="tcp://127.0.0.1:1"))
    assert engine.link.connect() is client
    engine.close()
    assert client.closed == 1
