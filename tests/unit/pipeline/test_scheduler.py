"""What every scheduler shares: the outbox that wakes the stage, tombstones, error messages."""

from __future__ import annotations

from omnivox.core.errors import EngineFailure
from omnivox.pipeline.scheduler import (
    OutgoingMessage,
    SchedulerOutbox,
    Tombstones,
    error_message,
)


def test_outbox_drain_takes_everything_and_clears_the_signal() -> None:
    import select

    box = SchedulerOutbox()
    try:
        assert box.drain() == []
        assert select.select([box.fileno()], [], [], 0)[0] == []
        box.put(OutgoingMessage("a", "result", {}))
        box.put(OutgoingMessage("b", "stream", {"x": 1}))
        assert select.select([box.fileno()], [], [], 0)[0] == [box.fileno()]  # readable: wake up
        got = box.drain()
        assert [o.request_id for o in got] == ["a", "b"]
        assert select.select([box.fileno()], [], [], 0)[0] == []
        assert box.drain() == []
    finally:
        box.close()
        box.close()  # twice is harmless


def test_outbox_survives_more_puts_than_the_pipe_holds() -> None:
    box = SchedulerOutbox()
    try:
        for i in range(100_000):
            box.put(OutgoingMessage(str(i), "stream", {}))
        assert len(box.drain()) == 100_000
    finally:
        box.close()


def test_tombstones_remember_a_bounded_number_of_ids() -> None:
    t = Tombstones(keep=3)
    for rid in "abcd":
        t.add(rid)
    assert "a" not in t and all(r in t for r in "bcd")
    t.add("b")  # re-adding refreshes it
    t.add("e")
    assert "b" in t and "c" not in t
    assert 5 not in t


def test_error_message_carries_the_code_and_the_message() -> None:
    out = error_message("r", EngineFailure("broken model"))
    assert out == OutgoingMessage("r", "error", {"code": "engine_error", "message": "broken model"})
    assert error_message("r", KeyError("k")).data["code"] == "internal_error"
