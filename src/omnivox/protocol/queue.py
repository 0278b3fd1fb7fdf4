"""Queue messages sent to a client waiting for a worker."""

from __future__ import annotations

from typing import Literal

from omnivox.protocol.wire import Msg


class Queued(Msg):
    type: Literal["queued"] = "queued"
    ticket_id: str
    position: int  # 1 = next to be served
    queue_length: int
    estimated_wait_s: float


class QueueUpdate(Msg):
    type: Literal["queue_update"] = "queue_update"
    ticket_id: str
    position: int
    queue_length: int
    estimated_wait_s: float


class QueueDone(Msg):
    type: Literal["queue_done"] = "queue_done"
    ticket_id: str
    worker_id: str
    waited_s: float
