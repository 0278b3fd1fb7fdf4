"""Membership over a stand-in store (a mock of the store's scripts; the real ones run against
redis-server in test_shared.py): what a beat sends, when a gateway re-asserts what it holds and in
what shape, reaping, and what /health says."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from omnivox.core.errors import StoreUnavailable
from omnivox.gateway.cluster.membership import Membership
from omnivox.gateway.scheduling.store import Assignment


@dataclass
class FakeStore:
    """Mock of ``RedisStore``: each op answers from ``replies`` and is recorded."""

    replies: dict[str, Any] = field(default_factory=dict)
    gateway_id: str = "gw-a"
    lease_s: float = 3.0
    resume_grace_ms: int = 5000
    info: dict[str, Any] = field(default_factory=lambda: {"url": "http://a"})
    waiting: list[Any] = field(default_factory=list)
    serving: list[Any] = field(default_factory=list)
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    resolved: list[Any] = field(default_factory=list)
    restarts: int = 0
    hooked: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.inbox = SimpleNamespace(restart=self._restart, malformed=1)
        self.beat_hooks = [self._hook]

    def _restart(self) -> None:
        self.restarts += 1

    async def _hook(self, lost: bool) -> None:
        self.hooked.append(lost)

    async def call(self, op: str, *args: Any) -> Any:
        self.calls.append((op, *args))
        reply = self.replies[op]
        if isinstance(reply, Exception):
            raise reply
        return reply

    def held(self) -> tuple[list[Any], list[Any]]:
        return self.waiting, self.serving

    def resolve(self, entries: list[Any]) -> None:
        self.resolved.append(entries)


def _waiter(tid: str, seq: int, history: str | None = None) -> Any:
    ticket = SimpleNamespace(ticket_id=tid, task_type="realtime", history_hash=history)
    return SimpleNamespace(ticket=ticket, seq=seq, enq_ms=100 + seq, reasserted_ms=0)


def _served(tid: str) -> Any:
    given = Assignment(tid, "w1", "http://w1", "mock", "streaming", epoch=4)
    return SimpleNamespace(assignment=given, busy_ms=900, seq=7, enq_ms=50)


def _membership(status: str, **kw: Any) -> tuple[Membership, FakeStore]:
    store = FakeStore(replies={"beat": [status, "boot-2", 12345], "reassert": ["ok", [["d"]]]}, **kw)
    return Membership(store), store  # type: ignore[arg-type]


async def test_a_beat_renews_the_lease_with_its_hold_and_learns_the_stores_incarnation() -> None:
    m, store = _membership("ok")
    assert m.lease_ms == 3000
    assert await m.beat() == "ok"
    op, gw, boot, lease, info, _token, hold = store.calls[0]
    assert (op, gw, boot, lease, json.loads(info), hold) == (
        "beat",
        "gw-a",
        "",
        3000,
        {"url": "http://a"},
        4000,
    )
    assert m.boot == "boot-2" and len(store.calls) == 1  # nothing held, nothing lost: no re-assertion
    assert store.hooked == [False] and store.restarts == 0
    await m.beat()
    assert store.calls[-1][2] == "boot-2"  # the next beat names the incarnation it knows


@pytest.mark.parametrize(("status", "restarts"), [("fresh", 1), ("reaped", 0)])
async def test_a_lost_store_or_a_reaped_gateway_re_asserts_even_holding_nothing(status, restarts) -> None:
    m, store = _membership(status)
    await m.beat()
    assert [c[0] for c in store.calls] == ["beat", "reassert"]
    assert store.calls[1][1:] == ("gw-a", 0, 0)
    assert store.restarts == restarts and store.hooked == [True]
    assert store.resolved == [[["d"]]]


async def test_joining_while_holding_sessions_re_asserts_them_in_the_scripts_shape() -> None:
    m, store = _membership(
        "joined", waiting=[_waiter("t1", 1, "h"), _waiter("t2", 2)], serving=[_served("t0")]
    )
    await m.beat()
    assert store.calls[1] == (
        "reassert",
        "gw-a",
        2,
        "t1", 1, "realtime", "h", 101,
        "t2", 2, "realtime", "", 102,
        1,
        "t0", "w1", "http://w1", 4, "streaming", 900, 7, 50,
    )  # fmt: skip
    # its tickets were in this store all along: an assignment made before this is real
    assert [w.reasserted_ms for w in store.waiting] == [0, 0]
    assert store.hooked == [False]


@pytest.mark.parametrize(("status", "undone"), [("reaped", 12345), ("fresh", 0)])
async def test_only_a_reap_undoes_what_was_assigned_before_the_re_assertion(status, undone) -> None:
    # a reap released what it held; a store that lost its state lost its assignments with it, and
    # one it made since (it served before the first beat told it it had restarted) is real
    m, store = _membership(status, waiting=[_waiter("t1", 1)])
    await m.beat()
    assert [w.reasserted_ms for w in store.waiting] == [undone]


async def test_joining_holding_nothing_says_nothing_more() -> None:
    m, store = _membership("joined")
    await m.beat()
    assert [c[0] for c in store.calls] == ["beat"]


async def test_reaping_hands_on_what_was_dispatched_and_names_the_reaped() -> None:
    store = FakeStore(replies={"reap": [["gw-b", "gw-c"], [["t9", "w2"]]]})
    m = Membership(store)  # type: ignore[arg-type]
    assert await m.reap() == ["gw-b", "gw-c"]
    assert store.calls == [("reap", "gw-a", 5000)] and store.resolved == [[["t9", "w2"]]]


async def test_status_lists_the_live_gateways_with_their_lease_left() -> None:
    live = [
        ("gw-a", "15000", json.dumps({"url": "http://a"})),
        ("gw-b", "11500", json.dumps({"url": "http://b"})),
    ]
    store = FakeStore(replies={"gateways": [10000, live]})
    body = await Membership(store).status("redis://x", True, 2)  # type: ignore[arg-type]
    assert body == {
        "kind": "redis",
        "url": "redis://x",
        "up": True,
        "gateway_id": "gw-a",
        "pending_operations": 2,
        "malformed_inbox_events": 1,
        "gateways": [
            {"url": "http://a", "gateway_id": "gw-a", "lease_left_s": 5.0, "self": True},
            {"url": "http://b", "gateway_id": "gw-b", "lease_left_s": 1.5, "self": False},
        ],
    }


async def test_status_of_an_unreachable_store_is_down_without_gateways() -> None:
    store = FakeStore(replies={"gateways": StoreUnavailable("down")})
    body = await Membership(store).status(None, True, 0)  # type: ignore[arg-type]
    assert body["up"] is False and "gateways" not in body
