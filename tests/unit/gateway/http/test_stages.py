"""POST /api/pipeline (a coordinator's report, worker key) and GET /api/stages (admin), /health."""

from __future__ import annotations

from fastapi.testclient import TestClient

from omnivox.core.config import Settings
from omnivox.gateway.app import create_gateway_app

REPORT = {
    "pipeline": "cascade",
    "address": "tcp://127.0.0.1:5555",
    "epoch": "e1",
    "session_slots": 8,
    "stages": [
        {
            "name": "asr",
            "scheduler": "streaming",
            "model": "whisper",
            "alive": True,
            "pid": 12,
            "load": {"slots_used": 1, "slots_total": 8, "decode_calls": 4, "decode_items": 6},
        },
        {"name": "llm", "scheduler": "parallel", "model": "chat", "alive": False},
    ],
}


def test_a_report_shows_in_stages_and_health_and_sets_the_slots() -> None:
    app = create_gateway_app(Settings(worker_key="wk", admin_key="ak"))
    http = TestClient(app)  # not entered: no health loop
    assert http.get("/api/stages", headers={"Authorization": "Bearer ak"}).json()["stages"] == []
    assert http.post("/api/pipeline", json=REPORT).status_code == 401  # the worker key is needed
    assert http.post("/api/pipeline", json=REPORT, headers={"Authorization": "Bearer wk"}).status_code == 200
    view = http.get("/api/stages", headers={"Authorization": "Bearer ak"}).json()
    assert view["pipeline"] == "cascade" and [s["name"] for s in view["stages"]] == ["asr", "llm"]
    assert view["stages"][0]["load"]["decode_items"] == 6
    assert http.get("/api/stages").status_code == 401
    health = http.get("/health").json()
    assert health["pipeline"] == {
        "name": "cascade",
        "stages": 2,
        "stages_alive": 1,
        "stale": False,
        "session_slots": 8,
        "session_slots_used": 0,
    }
    assert app.state.ctx.store.pool.session_slots == 8
    # a coordinator that stops reporting: its last view is shown as stale, with no stage alive
    app.state.ctx.store._report_at -= 60
    health = http.get("/health").json()["pipeline"]
    assert health["stale"] is True and health["stages_alive"] == 0
    assert http.get("/api/stages", headers={"Authorization": "Bearer ak"}).json()["stale"] is True


def test_a_malformed_report_is_refused() -> None:
    http = TestClient(create_gateway_app(Settings()))
    assert http.post("/api/pipeline", json={"pipeline": "x"}).status_code == 422
