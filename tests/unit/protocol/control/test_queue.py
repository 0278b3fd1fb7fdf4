"""Queue notices and their wording for the streaming protocol."""

from __future__ import annotations

import dataclasses
import json

import pytest

from omnivox.protocol.control.queue import Queued, QueueDone, QueueNotice, QueueUpdate, queue_message


def test_notice_defaults():
    n = QueueNotice("queued", "t1")
    assert (n.position, n.queue_length, n.estimated_wait_s) == (0, 0, 0.0)
    assert (n.worker_id, n.waited_s, n.was_queued) == (None, 0.0, True)


def test_notices_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        QueueNotice("queued", "t1").position = 3


@pytest.mark.parametrize(("kind", "cls"), [("queued", Queued), ("queue_update", QueueUpdate)])
def test_waiting_notices_say_the_place(kind, cls):
    notice = QueueNotice(
        kind, "t1", position=2, queue_length=5, estimated_wait_s=7.5, worker_id="w", waited_s=1
    )
    msg = queue_message(notice)
    assert type(msg) is cls
    assert json.loads(msg.model_dump_json(exclude_none=True)) == {
        "type": kind,
        "ticket_id": "t1",
        "position": 2,
        "queue_length": 5,
        "estimated_wait_s": 7.5,
    }


def test_the_first_notice_carries_the_resume_token_and_says_a_place_taken_back():
    notice = QueueNotice("queued", "t1", position=1, queue_length=1, resume_token="t1.abc", resumed=True)
    said = json.loads(queue_message(notice).model_dump_json(exclude_none=True))
    assert said["resume_token"] == "t1.abc" and said["resumed"] is True
    update = QueueNotice("queue_update", "t1", resume_token="t1.abc", resumed=True)
    assert "resume_token" not in json.loads(queue_message(update).model_dump_json(exclude_none=True))


def test_done_says_the_worker_and_the_wait():
    msg = queue_message(QueueNotice("queue_done", "t1", position=3, worker_id="w1", waited_s=2.5))
    assert type(msg) is QueueDone
    assert msg.dump() == {"type": "queue_done", "ticket_id": "t1", "worker_id": "w1", "waited_s": 2.5}


def test_done_without_a_worker_id_has_an_empty_one():
    assert queue_message(QueueNotice("queue_done", "t1")).worker_id == ""
