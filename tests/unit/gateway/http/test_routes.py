"""The gateway's routes with one gateway: /health says which store it has; a drain (a rolling
update's pre-stop) refuses new sessions with gateway_draining and answers /health with 503."""

from __future__ import annotations

from fastapi.testclient import TestClient

from omnivox.core.config import Settings
from omnivox.gateway.app import create_gateway_app


def test_health_names_the_in_memory_store() -> None:
    app = create_gateway_app(Settings())
    http = TestClient(app)  # not entered: no health loop
    store = http.get("/health").json()["store"]
    assert store["kind"] == "memory" and store["up"] is True
    assert store["gateways"] == [{"gateway_id": app.state.ctx.store.gateway_id, "self": True}]


def test_a_draining_gateway_refuses_new_sessions_and_says_it_is_not_ready() -> None:
    app = create_gateway_app(Settings(admin_key="ak"))
    http = TestClient(app)
    assert http.post("/api/drain").status_code == 401  # the admin key is needed
    drained = http.post("/api/drain", headers={"Authorization": "Bearer ak"})
    assert drained.json() == {"draining": True, "active_sessions": 0}
    health = http.get("/health")
    assert health.status_code == 503 and health.json()["draining"] is True
    with http.websocket_connect("/ws/streaming/s1") as ws:
        refusal = ws.receive_json()
    assert refusal["code"] == "gateway_draining"
