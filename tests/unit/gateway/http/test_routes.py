"""The gateway's routes with one gateway: GET /health (what is wrong, said; which store it has),
GET /v1/models (what a client may name), and a drain (a rolling update's pre-stop) that refuses new
sessions with gateway_draining and answers /health with 503."""

from __future__ import annotations

from fastapi.testclient import TestClient

from omnivox.core.config import Settings
from omnivox.gateway.app import create_gateway_app
from omnivox.protocol.control.workers import Capabilities, WorkerHealth, WorkerState


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


def _worker(app, url: str, *, problems: list[str] | None = None, state=WorkerState.IDLE) -> None:
    pool = app.state.ctx.store.pool  # the in-memory store's
    worker = pool.add_worker(url)
    health = WorkerHealth(
        state=state,
        engine="cascade",
        capabilities=Capabilities(realtime=True),
        problems=problems or [],
        status="degraded" if problems else "ok",
    )
    pool.apply_health(worker, health)


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


def test_metrics_need_the_admin_key_when_one_is_set_unless_configured_otherwise() -> None:
    from omnivox.gateway.http.routes import metrics_need_admin

    assert metrics_need_admin(Settings()) is False
    assert metrics_need_admin(Settings(admin_key="ak")) is True
    assert metrics_need_admin(Settings(api_key="k")) is True  # api_key guards every role
    assert metrics_need_admin(Settings(admin_key="ak", metrics_need_admin=False)) is False
    assert metrics_need_admin(Settings(metrics_need_admin=True)) is True  # with no admin key, anyone is admin
    http = TestClient(create_gateway_app(Settings(admin_key="ak")))
    refused = http.get("/metrics")
    assert refused.status_code == 401 and refused.json()["detail"]["code"] == "unauthorized"
    shown = http.get("/metrics", headers={"Authorization": "Bearer ak"})
    assert shown.status_code == 200 and "omnivox_queue_length 0.0" in shown.text


def test_metrics_count_the_workers_by_state_and_the_queue() -> None:
    app = create_gateway_app(Settings())
    http = TestClient(app)  # not entered: no health loop
    _worker(app, "http://127.0.0.1:9001")
    text = http.get("/metrics").text
    assert 'omnivox_workers{state="IDLE"} 1.0' in text and 'omnivox_workers{state="OFFLINE"} 0.0' in text
    assert "omnivox_queue_length 0.0" in text


def test_health_reports_the_bytes_held_for_waiting_clients() -> None:
    app = create_gateway_app(Settings(queued_bytes_total=1000))
    http = TestClient(app)
    assert http.get("/health").json()["queued_bytes_held"] == 0
    held = app.state.ctx.held_bytes
    assert held.take(600) and not held.take(600)  # the second would pass the total
    assert http.get("/health").json()["queued_bytes_held"] == 600
    held.give(600)
    assert http.get("/health").json()["queued_bytes_held"] == 0


def test_the_seats_of_a_process_register_in_one_request_each_as_alone() -> None:
    app = create_gateway_app(Settings(worker_key="wk"))
    http = TestClient(app)  # not entered: no health loop
    key = {"Authorization": "Bearer wk"}
    seats = {"seats": [{"url": f"http://127.0.0.1:9001/seats/{i}"} for i in range(3)]}
    assert http.post("/api/workers/register/seats", json=seats).status_code == 401
    first = http.post("/api/workers/register/seats", json=seats, headers=key).json()["seats"]
    workers = {w.worker_id: w.url for w in app.state.ctx.store.pool.workers.values()}
    assert [workers[r["worker_id"]] for r in first] == [s["url"] for s in seats["seats"]]
    ids = [r["worker_id"] for r in first]
    again = {"seats": [{**s, "worker_id": i} for s, i in zip(seats["seats"], ids, strict=True)]}
    assert http.post("/api/workers/register/seats", json=again, headers=key).json()["seats"] == first
    bad = {"seats": [{"url": "http://127.0.0.1:9002/seats/0"}, {"url": "http://127.0.0.1:9002/admin"}]}
    refused = http.post("/api/workers/register/seats", json=bad, headers=key)
    assert refused.status_code == 400 and refused.json()["detail"]["code"] == "invalid_worker_url"
    assert len(app.state.ctx.store.pool.workers) == 3  # the refused request registered no seat


def test_a_seats_registration_of_none_or_too_many_seats_is_refused_whole() -> None:
    app = create_gateway_app(Settings(worker_key="wk"))
    http = TestClient(app)  # not entered: no health loop
    key = {"Authorization": "Bearer wk"}
    none = http.post("/api/workers/register/seats", json={"seats": []}, headers=key)
    many = {"seats": [{"url": f"http://127.0.0.1:9001/seats/{i}"} for i in range(65)]}
    too_many = http.post("/api/workers/register/seats", json=many, headers=key)
    assert none.status_code == too_many.status_code == 422
    assert [e["type"] for e in none.json()["detail"]] == ["too_short"]
    assert [e["type"] for e in too_many.json()["detail"]] == ["too_long"]
    assert not app.state.ctx.store.pool.workers  # nothing registered
