"""The coordinator's status view, from a fake coordinator (the ``Reporting`` protocol)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omnivox.pipeline.messages import CLIENT, Payload, Plan, StageInfo
from omnivox.pipeline.requests import RequestState, TrackedRequest
from omnivox.pipeline.spec import PipelineSpec
from omnivox.pipeline.status import ClientRecord, StageRecord, status_view


def spec() -> PipelineSpec:
    return PipelineSpec.model_validate(
        {
            "name": "demo",
            "stages": [
                {
                    "name": "asr",
                    "scheduler": "streaming",
                    "model": "echo",
                    "slots": 3,
                    "next": ["llm"],
                    "holds_sessions": True,
                },
                {
                    "name": "llm",
                    "scheduler": "parallel",
                    "model": "noop",
                    "slots": 2,
                    "next": ["tts"],
                    "placement": "remote",
                },
                {
                    "name": "tts",
                    "scheduler": "streaming",
                    "model": "echo",
                    "slots": 5,
                    "holds_sessions": True,
                },
            ],
        }
    )


@dataclass
class FakeCoordinator:
    spec: PipelineSpec
    address: str = "tcp://127.0.0.1:7000"
    epoch: str = "boot-1"
    stages: dict[str, StageRecord] = field(default_factory=dict)
    clients: dict[bytes, ClientRecord] = field(default_factory=dict)
    requests: dict[str, TrackedRequest] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def alive(self, name: str) -> bool:
        record = self.stages.get(name)
        return bool(record and record.alive)


def record(name: str, last_seen: float, **kw) -> StageRecord:
    info = StageInfo(name, f"tcp://10.0.0.1:{len(name)}", "h", 100 + len(name))
    return StageRecord(info, name.encode(), last_seen, **kw)


def request(rid: str, state: RequestState) -> TrackedRequest:
    plan = Plan({"asr": [CLIENT]}, {"asr": []}, {"asr": []}, ["asr"], ["asr"])
    r = TrackedRequest(rid, b"c", plan, Payload(), [], 0.0)
    if state is not RequestState.PENDING:
        if state is RequestState.COMPLETED:
            r.machine.move(RequestState.RUNNING)
        r.machine.move(state)
    return r


def test_an_empty_coordinator_lists_every_spec_stage_as_not_alive() -> None:
    view = status_view(FakeCoordinator(spec()), now=10.0)
    assert view["pipeline"] == "demo" and view["epoch"] == "boot-1"
    assert view["address"] == "tcp://127.0.0.1:7000"
    assert [s["name"] for s in view["stages"]] == ["asr", "llm", "tts"]
    for stage in view["stages"]:
        assert stage["alive"] is False
        assert stage["address"] is None and stage["pid"] is None and stage["last_seen_s"] is None
        assert stage["registrations"] == 0 and stage["lost"] == 0 and stage["load"] == {}
    assert view["clients"] == 0 and view["requests"] == {} and view["counts"] == {}
    assert view["session_slots"] == 0  # holders exist, none alive


def test_stage_rows_carry_the_spec_and_the_record() -> None:
    c = FakeCoordinator(spec())
    c.stages["llm"] = record("llm", 7.5, load={"queue": 2.0}, registrations=3, lost=1)
    view = status_view(c, now=10.0)
    llm = next(s for s in view["stages"] if s["name"] == "llm")
    assert llm == {
        "name": "llm",
        "scheduler": "parallel",
        "model": "noop",
        "placement": "remote",
        "alive": True,
        "address": "tcp://10.0.0.1:3",
        "pid": 103,
        "last_seen_s": 2.5,
        "registrations": 3,
        "lost": 1,
        "load": {"queue": 2.0},
    }


def test_the_load_in_the_view_is_a_copy() -> None:
    c = FakeCoordinator(spec())
    c.stages["asr"] = record("asr", 0.0, load={"queue": 1.0})
    view = status_view(c, now=1.0)
    view["stages"][0]["load"]["queue"] = 99.0
    assert c.stages["asr"].load == {"queue": 1.0}
    view["counts"]["x"] = 1
    assert c.counts == {}


def test_session_slots_sum_the_alive_holders_only() -> None:
    c = FakeCoordinator(spec())
    c.stages["asr"] = record("asr", 0.0)
    c.stages["tts"] = record("tts", 0.0, alive=False)
    c.stages["llm"] = record("llm", 0.0)  # alive but holds no sessions
    assert status_view(c, 0.0)["session_slots"] == 3
    c.stages["tts"].alive = True
    assert status_view(c, 0.0)["session_slots"] == 8


def test_session_slots_is_none_without_holders() -> None:
    plain = PipelineSpec.model_validate(
        {"name": "p", "stages": [{"name": "a", "scheduler": "simple", "model": "noop"}]}
    )
    c = FakeCoordinator(plain)
    c.stages["a"] = record("a", 0.0)
    assert status_view(c, 0.0)["session_slots"] is None


def test_a_dead_record_is_reported_not_alive_but_keeps_its_history() -> None:
    c = FakeCoordinator(spec())
    c.stages["tts"] = record("tts", 1.0, alive=False, lost=2, registrations=4)
    tts = status_view(c, 4.0)["stages"][2]
    assert tts["alive"] is False and tts["lost"] == 2 and tts["registrations"] == 4
    assert tts["last_seen_s"] == 3.0 and tts["pid"] == 103


def test_requests_are_counted_by_state_and_clients_by_number() -> None:
    c = FakeCoordinator(spec())
    c.requests = {
        "a": request("a", RequestState.PENDING),
        "b": request("b", RequestState.PENDING),
        "c": request("c", RequestState.RUNNING),
        "d": request("d", RequestState.COMPLETED),
    }
    c.clients = {b"1": ClientRecord("gw", "h", 0.0), b"2": ClientRecord("cli", "h2", 0.0)}
    c.counts = {"submitted": 4, "failed": 0}
    view = status_view(c, 0.0)
    assert view["requests"] == {"pending": 2, "running": 1, "completed": 1}
    assert view["clients"] == 2
    assert view["counts"] == {"submitted": 4, "failed": 0}


def test_last_seen_is_rounded_to_milliseconds() -> None:
    c = FakeCoordinator(spec())
    c.stages["asr"] = record("asr", 1.0)
    assert status_view(c, 1.123456)["stages"][0]["last_seen_s"] == 0.123


def test_a_stage_record_defaults() -> None:
    r = record("x", 5.0)
    assert r.alive and r.registrations == 1 and r.lost == 0 and r.load == {}
