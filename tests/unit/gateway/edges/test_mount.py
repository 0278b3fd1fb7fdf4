"""Client WebSockets go straight to the edge (``ClientSockets``), everything else to the app."""

from __future__ import annotations

from fastapi.testclient import TestClient

from omnivox.core.config import Settings
from omnivox.gateway.app import create_gateway_app
from omnivox.gateway.edges.mount import ClientSockets


def test_client_sockets_reach_the_edge_and_the_rest_the_app() -> None:
    app = create_gateway_app(Settings(client_key="ck"))
    http = TestClient(ClientSockets(app))  # not entered: no health loop
    assert http.get("/health").json()["store"]["kind"] == "memory"  # HTTP: the app
    with http.websocket_connect("/ws/streaming/s1") as ws:  # the edge: it asks for the client key
        assert ws.receive_json()["code"] == "unauthorized"
    headers = {"Authorization": "Bearer ck"}
    with http.websocket_connect("/ws/streaming/s2", headers=headers) as ws:
        ws.send_json({"type": "prefill", "messages": [{"role": "user", "content": "hi"}]})
        queued = ws.receive_json()  # no worker: it waits in the queue, heard from the edge
    assert queued["type"] == "queued" and queued["position"] == 1
