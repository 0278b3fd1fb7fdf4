"""The session registry: a record per connection, its state as admission moves it, and its view."""

from __future__ import annotations

import re

import pytest

from omnivox.gateway.edges.sessions import SessionRecord, SessionRegistry, SessionState


class Wall:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_record_starts_idle_with_a_unique_key():
    a = SessionRecord(kind="streaming", client_session_id="same", started_at=0.0)
    b = SessionRecord(kind="streaming", client_session_id="same", started_at=0.0)
    assert a.state is SessionState.IDLE and a.worker_id is None and a.ticket_id is None
    assert re.fullmatch(r"s_[0-9a-f]{16}", a.session_key) and a.session_key != b.session_key
    assert a != b  # records are compared by identity, not by value


def test_queued_active_idle():
    r = SessionRecord(kind="realtime", client_session_id="c", started_at=0.0)
    r.queued("t1")
    assert (r.state, r.ticket_id, r.worker_id) == (SessionState.QUEUED, "t1", None)
    r.active("w1", "t1")
    assert (r.state, r.ticket_id, r.worker_id) == (SessionState.ACTIVE, "t1", "w1")
    r.paused = True
    r.idle()
    assert (r.state, r.ticket_id, r.worker_id, r.paused) == (SessionState.IDLE, None, None, False)


def test_queued_again_forgets_the_old_worker():
    r = SessionRecord(kind="streaming", client_session_id="c", started_at=0.0)
    r.active("w1")
    r.queued(None)
    assert r.state is SessionState.QUEUED and r.worker_id is None and r.ticket_id is None


def test_view():
    r = SessionRecord(kind="duplex", client_session_id="mine", started_at=100.0)
    r.active("w9", "t9")
    r.turns = 4
    assert r.view(now=112.34567) == {
        "session_key": r.session_key,
        "session_id": "mine",
        "kind": "duplex",
        "state": "active",
        "worker_id": "w9",
        "ticket_id": "t9",
        "turns": 4,
        "paused": False,
        "started_at": 100.0,
        "duration_s": 12.346,
    }


def test_a_record_lives_exactly_as_long_as_its_block():
    wall = Wall(50.0)
    registry = SessionRegistry(wall)
    assert len(registry) == 0 and registry.views() == []
    with registry.track("streaming", "a") as a:
        assert a.started_at == 50.0 and len(registry) == 1
        with registry.track("realtime", "b"):
            wall.now = 60.0
            views = registry.views()
            assert [v["session_id"] for v in views] == ["a", "b"]
            assert [v["duration_s"] for v in views] == [10.0, 10.0]
        assert len(registry) == 1
    assert len(registry) == 0


def test_a_session_that_fails_is_still_removed():
    registry = SessionRegistry(Wall(0.0))
    with pytest.raises(RuntimeError), registry.track("streaming", "x"):
        raise RuntimeError("connection broke")
    assert len(registry) == 0


def test_clients_may_reuse_an_id_and_both_are_listed():
    registry = SessionRegistry(Wall(0.0))
    with registry.track("streaming", "dup") as a, registry.track("streaming", "dup") as b:
        keys = {v["session_key"] for v in registry.views()}
        assert keys == {a.session_key, b.session_key}
