"""The queue, as clients hear it while they wait for a worker.

``QueueNotice`` is what admission says (protocol-neutral); each wire protocol words it its own way
(``WireProtocol.notice_frame``): the streaming and duplex protocols as the messages below, the
realtime protocol as its ``omnivox.queue`` extension event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from omnivox.protocol.wire import Msg

NoticeKind = Literal["queued", "queue_update", "queue_done"]


@dataclass(frozen=True)
class QueueNotice:
    kind: NoticeKind
    ticket_id: str
    position: int = 0  # 1 = next to be served; 0 once assigned
    queue_length: int = 0
    estimated_wait_s: float = 0.0
    worker_id: str | None = None  # queue_done only
    waited_s: float = 0.0  # queue_done only
    was_queued: bool = True  # queue_done only: False when a worker was free at once
    resume_token: str | None = None  # queued only: how to take this place back after a drop
    resumed: bool = False  # queued only: the client took back the place it held before


class Queued(Msg):
    type: Literal["queued"] = "queued"
    ticket_id: str
    position: int  # 1 = next to be served
    queue_length: int
    estimated_wait_s: float
    # connect again with ?resume=<token> after a drop to keep the place (absent: resume is off)
    resume_token: str | None = None
    resumed: bool | None = None  # true: the place the client held before its connection dropped


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


def queue_message(notice: QueueNotice) -> Msg:
    """The MiniCPM-o demo's wording of a notice (streaming and duplex)."""
    if notice.kind == "queue_done":
        return QueueDone(
            ticket_id=notice.ticket_id, worker_id=notice.worker_id or "", waited_s=notice.waited_s
        )
    if notice.kind == "queued":
        return Queued(
            ticket_id=notice.ticket_id,
            position=notice.position,
            queue_length=notice.queue_length,
            estimated_wait_s=notice.estimated_wait_s,
            resume_token=notice.resume_token,
            resumed=notice.resumed or None,
        )
    return QueueUpdate(
        ticket_id=notice.ticket_id,
        position=notice.position,
        queue_length=notice.queue_length,
        estimated_wait_s=notice.estimated_wait_s,
    )
