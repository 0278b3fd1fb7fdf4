"""``GET /v1/voices``: the union of the usable workers' voices, the first worker's first voice the
default."""

from __future__ import annotations

from omnivox.gateway.http.voices import gather_voices
from omnivox.gateway.scheduling.store import WorkerView
from omnivox.protocol.control.workers import WorkerState as S


def _w(state: S, *voices: str) -> WorkerView:
    return WorkerView(worker_id="w", url="u", state=state, voices=voices)


def test_voices_are_the_union_in_worker_then_voice_order_with_one_default() -> None:
    got = gather_voices([_w(S.IDLE, "af", "bm"), _w(S.BUSY_STREAMING, "bm", "cf"), _w(S.LOADING, "dm")])
    assert got == {
        "voices": [
            {"id": "af", "default": True},
            {"id": "bm", "default": False},
            {"id": "cf", "default": False},
            {"id": "dm", "default": False},
        ],
        "default": "af",
    }


def test_offline_and_failed_workers_offer_no_voice_and_never_the_default() -> None:
    got = gather_voices([_w(S.OFFLINE, "gone"), _w(S.ERROR, "broken"), _w(S.IDLE), _w(S.DUPLEX_PAUSED, "x")])
    assert got == {"voices": [{"id": "x", "default": True}], "default": "x"}


def test_no_voices_anywhere() -> None:
    assert gather_voices([]) == {"voices": [], "default": None}
    assert gather_voices([_w(S.IDLE), _w(S.OFFLINE, "a")]) == {"voices": [], "default": None}
