"""GET /health (what is wrong, said) and GET /v1/models (what a client may name), on a real app."""

from __future__ import annotations

from fastapi.testclient import TestClient

from omnivox.core.config import Settings
from omnivox.gateway.app import create_gateway_app
from omnivox.gateway.scheduling.health import apply_health
from omnivox.protocol.control.workers import Capabilities, WorkerHealth, WorkerState


def _worker(app, url: str, *, problems: list[str] | None = None, state=WorkerState.IDLE) -> None:
    pool = app.state.ctx.pool
    worker = pool.add_worker(url)
    health = WorkerHealth(
        state=state,
        engine="cascade",
        capabilities=Capabilities(realtime=True),
        problems=problems or [],
        status="degraded" if problems else "ok",
    )
    apply_health(pool, worker, health)


def test_health_is_degraded_with_the_reason_when_no_worker_can_serve_or_a_dependency_is_down() -> None:
    app = create_gateway_app(Settings())
    http = TestClient(app)  # not entered: no health loop
    empty = http.get("/health").json()
    assert empty["status"] == "degraded" and empty["problems"] == ["no worker can take a session"]
    _worker(app, "http://127.0.0.1:9001")
    assert http.get("/health").json()["status"] == "ok"
    down = "the llm server http://127.0.0.1:9 cannot be reached (ConnectError: refused)"
    _worker(app, "http://127.0.0.1:9002", problems=[down])
    health = http.get("/health").json()
    assert health["status"] == "degraded" and len(health["problems"]) == 1
    assert health["problems"][0].endswith(down) and health["workers_usable"] == 2


def test_models_lists_omnivox_and_the_engines_and_needs_the_client_key() -> None:
    app = create_gateway_app(Settings(api_key="k"))
    http = TestClient(app)
    _worker(app, "http://127.0.0.1:9001")
    assert http.get("/v1/models").status_code == 401
    auth = {"Authorization": "Bearer k"}
    listed = http.get("/v1/models", headers=auth).json()
    assert listed["object"] == "list" and [m["id"] for m in listed["data"]] == ["omnivox", "cascade"]
    assert all(m["object"] == "model" for m in listed["data"])
    assert http.get("/v1/models/omnivox", headers=auth).json()["id"] == "omnivox"
    missing = http.get("/v1/models/gpt-9", headers=auth)
    assert missing.status_code == 404 and missing.json()["detail"]["code"] == "model_not_found"
