"""``GET /v1/voices``: the TTS voices the pool can speak with, for a web page's voice picker.

The gateway has no TTS of its own; each worker reports the voices of its backend in its ``/health``
(default voice first), and the health loop copies them into the scheduler store. Workers that cannot serve
(OFFLINE, ERROR) are left out, so a picker never offers a voice nobody can speak right now.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Request

from omnivox.gateway.context import GatewayContext
from omnivox.gateway.scheduling.store import WorkerView
from omnivox.protocol.control.workers import WorkerState

router = APIRouter(tags=["voices"])

_UNUSABLE = (WorkerState.OFFLINE, WorkerState.ERROR)


def gather_voices(workers: Iterable[WorkerView]) -> dict[str, Any]:
    """The union of the usable workers' voices, in worker then voice order.

    The default is the first voice of the first worker that reports any (workers list their default
    first); ``None`` when no worker reports a voice.
    """
    names: dict[str, None] = {}  # an ordered set
    for worker in workers:
        if worker.state in _UNUSABLE:
            continue
        for voice in worker.voices:
            names.setdefault(voice, None)
    default = next(iter(names), None)
    return {"voices": [{"id": v, "default": v == default} for v in names], "default": default}


@router.get("/v1/voices")
async def list_voices(request: Request) -> dict[str, Any]:
    """``{"voices": [{"id", "default"}, ...], "default": id | null}``."""
    ctx: GatewayContext = request.app.state.ctx
    return gather_voices(await ctx.store.workers())
