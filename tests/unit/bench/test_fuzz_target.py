"""How the fuzzers read the server's reaction to a frame, and the keys they offer."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK
from websockets.frames import Close

from omnivox.bench.fuzz_target import FuzzStats, Target, classify, reaction, settle


@pytest.mark.parametrize(
    ("raw", "outcome"),
    [
        ('{"type": "error", "error": {"code": "invalid_json"}}', "error:invalid_json"),  # realtime
        ('{"type": "error", "code": "unknown_type", "message": "x"}', "error:unknown_type"),  # streaming
        ('{"type": "error", "error": "flat"}', "error:None"),  # an error with no code anywhere
        ('{"type": "session.created"}', "reply:session.created"),
        ('{"event": "clear", "streamSid": "MZ1"}', "reply:clear"),  # a carrier's message
        ('{"nothing": 1}', "reply:None"),
        ("[1, 2]", "reply:other"),
        ("42", "reply:other"),
        ("not json", "reply:text"),
        (b"\x00\xff binary", "reply:binary"),
        ("", "reply:text"),
    ],
)
def test_a_servers_message_is_classified_by_its_error_code_or_type(raw, outcome) -> None:
    assert classify(raw) == outcome


class FakeWs:
    """A stand-in socket (a mock): answers from a list, then stays silent or raises what it is given."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)

    async def recv(self) -> str | bytes:
        if not self.answers:
            await asyncio.sleep(3600)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, str | bytes)
        return answer


async def test_the_reaction_is_the_first_message_a_close_or_silence() -> None:
    assert await reaction(FakeWs(json.dumps({"type": "pong"})), 0.5) == "reply:pong"
    assert await reaction(FakeWs(), 0.01) == "silent"
    closed = ConnectionClosedError(Close(1008, "policy"), None)
    assert await reaction(FakeWs(closed), 0.5) == "closed:1008"
    dropped = ConnectionClosedError(None, None)  # no close frame came: the connection dropped
    assert await reaction(FakeWs(dropped), 0.5) == "closed:1006"


async def test_settle_reads_until_quiet_or_closed() -> None:
    ws = FakeWs('{"type": "session.created"}', '{"type": "session.updated"}')
    await settle(ws, 0.01)
    assert ws.answers == []
    # a close ends it (a real socket answers every later read with its close again: reading on spins)
    ws = FakeWs('{"type": "a"}', ConnectionClosedOK(Close(1000, ""), None), '{"type": "never read"}')
    await settle(ws, 0.5)
    assert ws.answers == ['{"type": "never read"}']


def test_a_target_offers_each_key_only_when_it_has_one() -> None:
    bare = Target(ws="ws://h", http="http://h")
    assert bare.client() == {} and bare.admin() == {}
    keyed = Target(ws="ws://h", http="http://h", client_key="c", admin_key="a")
    assert keyed.client() == {"Authorization": "Bearer c"} and keyed.admin() == {"Authorization": "Bearer a"}


def test_fresh_stats_count_nothing_and_share_no_list() -> None:
    a, b = FuzzStats(), FuzzStats()
    a.failed_checks.append("x")
    assert b.failed_checks == [] and (b.frames, b.errors, b.reconnects, b.checks) == (0, 0, 0, 0)
