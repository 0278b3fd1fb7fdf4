"""A gateway's inbox over a stand-in stream client (a mock of redis' XREAD/XTRIM; the real stream
runs against redis-server in test_shared.py): events acted on in order, the stream trimmed past
the last one read, unknown kinds skipped, a lost store read from the start."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from omnivox.core.errors import StoreUnavailable
from omnivox.gateway.cluster.inbox import Inbox
from omnivox.gateway.scheduling.store import Assignment


class FakeStreams:
    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.reads: list[tuple[dict[str, str], int | None]] = []
        self.trims: list[tuple[str, str]] = []

    async def xread(self, streams: dict[str, str], count: int, block: int | None) -> Any:
        self.reads.append((dict(streams), block))
        if not self.replies and block is not None:
            await asyncio.sleep(block / 1000)  # a blocking read that times out with nothing
        reply = self.replies.pop(0) if self.replies else []
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def xtrim(self, key: str, minid: str, approximate: bool) -> None:
        assert approximate is False
        self.trims.append((key, minid))


def _inbox(*replies: Any) -> tuple[Inbox, FakeStreams, list[Any], list[str]]:
    client, assigned, cancelled = FakeStreams(*replies), [], []
    inbox = Inbox(client, "{ovx}:inbox:gw-a", lambda a, at: assigned.append((a, at)), cancelled.append)
    return inbox, client, assigned, cancelled


ASSIGNED = {
    "k": "assigned",
    "t": "t1",
    "w": "w1",
    "u": "http://w1",
    "q": "realtime",
    "ep": "3",
    "h": "1",
    "b": "77",
}


async def test_events_are_acted_on_in_order_and_the_stream_trimmed_past_the_last() -> None:
    events = [
        ("1700-0", ASSIGNED),
        ("1700-1", {"k": "cancelled", "t": "t2"}),
        ("1701-9", {"k": "newer", "x": "1"}),
    ]
    inbox, client, assigned, cancelled = _inbox([("{ovx}:inbox:gw-a", events)])
    assert await inbox.poll(1000) == 3
    assert assigned == [(Assignment("t1", "w1", "http://w1", "", "realtime", 3, True), 77)]
    assert cancelled == ["t2"]  # and the kind this gateway does not know is skipped
    assert inbox.last == "1701-9"
    assert client.reads == [({"{ovx}:inbox:gw-a": "0-0"}, 1000)]
    assert client.trims == [("{ovx}:inbox:gw-a", "1701-10")]  # everything up to and with the last


async def test_an_empty_read_trims_nothing_and_the_next_read_goes_on_from_the_last() -> None:
    inbox, client, _, _ = _inbox([("k", [("5-0", {"k": "cancelled", "t": "t"})])], [], None)
    await inbox.poll()
    assert await inbox.poll() == 0 and await inbox.poll() == 0
    assert [r[0]["{ovx}:inbox:gw-a"] for r in client.reads] == ["0-0", "5-0", "5-0"]
    assert [r[1] for r in client.reads] == [None, None, None]  # not blocking unless asked
    assert len(client.trims) == 1


async def test_after_the_store_lost_its_state_the_inbox_is_read_from_its_start() -> None:
    inbox, client, _, _ = _inbox([("k", [("9-0", {"k": "cancelled", "t": "t"})])])
    await inbox.poll()
    inbox.restart()
    await inbox.poll()
    assert client.reads[-1][0] == {"{ovx}:inbox:gw-a": "0-0"}


async def test_an_unreachable_store_is_store_unavailable_and_the_place_is_kept() -> None:
    inbox, _, _, _ = _inbox(RedisConnectionError("refused"))
    inbox.last = "3-1"
    with pytest.raises(StoreUnavailable) as down:
        await inbox.poll()
    assert "(inbox)" in down.value.message and inbox.last == "3-1"


@pytest.mark.parametrize(
    "bad",
    [
        {"k": "assigned", "t": "t1"},  # no worker, url, task or epoch
        {**ASSIGNED, "ep": "three"},  # an epoch that is no number
        {"k": "cancelled"},  # no ticket
        {"k": "cancelled", "t": ""},
    ],
)
async def test_a_malformed_event_is_counted_logged_once_and_skipped_and_the_rest_acted_on(
    bad: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    events = [("1-0", bad), ("1-1", ASSIGNED), ("1-2", {"k": "cancelled", "t": "t2"})]
    inbox, client, assigned, cancelled = _inbox([("k", events)], [])
    with caplog.at_level("WARNING", logger="omnivox.gateway.cluster.inbox"):
        assert await inbox.poll() == 3
        assert await inbox.poll() == 0  # never read again
    assert inbox.malformed == 1
    assert [r.message for r in caplog.records if "malformed" in r.message and "1-0" in r.message] != []
    assert len(caplog.records) == 1
    assert [a.ticket_id for a, _ in assigned] == ["t1"] and cancelled == ["t2"]
    assert client.trims == [("{ovx}:inbox:gw-a", "1-3")]  # trimmed past it like any other


async def test_the_loop_goes_on_past_a_malformed_event_and_past_a_failing_handler() -> None:
    calls = 0

    done = asyncio.Event()

    def failing(ticket_id: str) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a handler's bug")
        cancelled.append(ticket_id)
        if ticket_id == "t3":
            done.set()

    replies = [
        [("k", [("1-0", {"k": "assigned", "ep": "x"})])],
        [("k", [("2-0", {"k": "cancelled", "t": "t1"})])],
        [("k", [("3-0", {"k": "cancelled", "t": "t2"})])],
        RedisConnectionError("refused"),
        [("k", [("4-0", {"k": "cancelled", "t": "t3"})])],
    ]
    client, cancelled = FakeStreams(*replies), []
    inbox = Inbox(client, "{ovx}:inbox:gw-a", lambda a, at: None, failing)
    task = asyncio.create_task(inbox.run())
    try:
        async with asyncio.timeout(10):
            await done.wait()
    finally:
        task.cancel()
    assert cancelled == ["t2", "t3"]
    assert inbox.malformed == 1 and inbox.last == "4-0"
    assert [r[0]["{ovx}:inbox:gw-a"] for r in client.reads[:5]] == ["0-0", "1-0", "2-0", "3-0", "3-0"]
