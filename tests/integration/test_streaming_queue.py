"""Queue positions, FIFO dispatch, cancellation and the full queue, on real processes."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from cluster import cluster
from wsclient import JsonClient, StreamingClient

USER = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    with cluster(workers=2, log_dir=tmp_path_factory.mktemp("logs"), OMNIVOX_MAX_QUEUE_SIZE="3") as c:
        yield c


async def hold(client: StreamingClient) -> dict:
    """Take a worker and keep it: a turn holds its worker from prefill until done."""
    await client.send("prefill", messages=USER)
    got = await client.until("prefill_done", "error")
    assert got[-1]["type"] == "prefill_done", got
    return got[-1]


async def finish(client: StreamingClient) -> dict:
    await client.send("generate")
    return (await client.until("done"))[-1]


async def test_two_workers_five_sessions_fifo(two_workers):
    c = two_workers
    a, b = StreamingClient(c.ws, "a"), StreamingClient(c.ws, "b")
    waiting = [StreamingClient(c.ws, f"q{i}") for i in range(3)]
    async with a, b, waiting[0], waiting[1], waiting[2]:
        held = {(await hold(a))["worker_id"], (await hold(b))["worker_id"]}
        assert len(held) == 2  # each session got its own worker
        for i, q in enumerate(waiting):
            await q.send("prefill", messages=USER)
            queued = await q.recv()
            assert queued["type"] == "queued"
            assert queued["position"] == i + 1 and queued["queue_length"] == i + 1
            assert queued["estimated_wait_s"] >= 0
        queue = httpx.get(c.url + "/api/queue").json()
        assert [t["position"] for t in queue["tickets"]] == [1, 2, 3]
        ticket = queue["tickets"][1]["ticket_id"]
        assert httpx.get(f"{c.url}/api/queue/{ticket}").json()["position"] == 2
        sessions = httpx.get(c.url + "/api/sessions").json()
        by_id = {s["session_id"]: s for s in sessions["sessions"]}
        assert sessions["active_sessions"] == 5
        assert {by_id[k]["state"] for k in ("a", "b")} == {"active"}
        assert {by_id["a"]["worker_id"], by_id["b"]["worker_id"]} == held
        assert [by_id[f"q{i}"]["state"] for i in range(3)] == ["queued"] * 3
        assert by_id["q1"]["ticket_id"] == ticket

        await finish(a)  # frees a worker: the first waiting session gets it
        got = await waiting[0].until("prefill_done")
        assert [m["type"] for m in got][-2:] == ["queue_done", "prefill_done"]
        # the others moved up one place and were told so
        upd1 = await waiting[1].until("queue_update")
        upd2 = await waiting[2].until("queue_update")
        assert upd1[-1]["position"] == 1 and upd2[-1]["position"] == 2

        await finish(b)
        await waiting[1].until("prefill_done")
        await finish(waiting[0])
        await waiting[2].until("prefill_done")
        for q in waiting[1:]:
            assert (await finish(q))["stopped"] is False
    order = [q for q in waiting]
    assert all(any(m["type"] == "queue_done" for m in q.seen) for q in order)
    c.wait_idle(2)
    # every connection is gone, and so is every session record (10 s at most)
    for _ in range(100):
        if httpx.get(c.url + "/api/sessions").json()["active_sessions"] == 0:
            break
        await asyncio.sleep(0.1)
    assert httpx.get(c.url + "/api/sessions").json() == {"active_sessions": 0, "sessions": []}


async def test_cancel_queued_ticket_and_disconnect_while_queued(two_workers):
    c = two_workers
    a, b, q, gone = (StreamingClient(c.ws, n) for n in ("a2", "b2", "q2", "gone"))
    async with a, b, q:
        await hold(a)
        await hold(b)
        async with gone:
            await gone.send("prefill", messages=USER)
            assert (await gone.recv())["type"] == "queued"
        await q.send("prefill", messages=USER)
        queued = await q.recv()
        # the vanished client's ticket is cancelled, so this one is first (10 s at most)
        for _ in range(100):
            tickets = httpx.get(c.url + "/api/queue").json()["tickets"]
            if len(tickets) == 1:
                break
            await asyncio.sleep(0.1)
        assert [t["ticket_id"] for t in tickets] == [queued["ticket_id"]]
        resp = httpx.delete(f"{c.url}/api/queue/{queued['ticket_id']}")
        assert resp.status_code == 200
        err = (await q.until("error"))[-1]
        assert err["code"] == "ticket_cancelled"
        assert httpx.delete(f"{c.url}/api/queue/{queued['ticket_id']}").status_code == 404
        assert httpx.get(f"{c.url}/api/queue/nope").status_code == 404
        await finish(a)
        await finish(b)
    c.wait_idle(2)


async def test_full_queue_is_refused_and_others_keep_going(two_workers):
    c = two_workers
    clients = [StreamingClient(c.ws, f"f{i}") for i in range(6)]
    for cl in clients:
        await cl.__aenter__()
    try:
        await hold(clients[0])
        await hold(clients[1])
        for cl in clients[2:5]:  # max_queue_size is 3
            await cl.send("prefill", messages=USER)
            assert (await cl.recv())["type"] == "queued"
        await clients[5].send("prefill", messages=USER)
        err = await clients[5].recv()
        assert err["type"] == "error" and err["code"] == "queue_full"
        with pytest.raises(ConnectionClosed):  # closed with 1008 (policy)
            await clients[5].recv()
        assert clients[5].ws.close_code == 1008
        await finish(clients[0])
        await clients[2].until("prefill_done")
        assert (await finish(clients[2]))["type"] == "done"
    finally:
        for cl in clients:
            await cl.__aexit__(None, None, None)
    c.wait_idle(2)
    assert c.health()["queue_length"] == 0


async def test_a_client_that_drops_while_queued_comes_back_to_its_place(two_workers):
    c = two_workers
    a, b, behind = (StreamingClient(c.ws, n) for n in ("a4", "b4", "behind4"))
    async with a, b, behind:
        await hold(a)
        await hold(b)
        async with StreamingClient(c.ws, "drops") as drops:
            await drops.send("prefill", messages=USER)
            first = await drops.recv()
        assert first["type"] == "queued" and first["position"] == 1 and first["resume_token"]
        # the gateway steps the dropped client out of the line when it sees the close, a moment
        # after the client closed: wait for that (10 s at most) before the next one joins
        with contextlib.suppress(TimeoutError):
            c.wait(lambda h: h["queue_length"] == 0, 10)
        await behind.send("prefill", messages=USER)
        assert (await behind.recv())["position"] == 1  # the one that dropped is out of the line...
        back = JsonClient(f"{c.ws}/ws/streaming/drops?resume={first['resume_token']}")
        async with back:
            await back.send("prefill", messages=USER)
            again = await back.recv()
            # ... and takes its old place back, ahead of the one that came after it
            assert again["type"] == "queued" and again["resumed"] is True and again["position"] == 1
            assert again["ticket_id"] == first["ticket_id"]
            assert (await behind.until("queue_update"))[-1]["position"] == 2
            await finish(a)
            assert (await back.until("prefill_done"))[-1]["type"] == "prefill_done"
            await finish(back)
        await finish(b)
        await behind.until("prefill_done")
        await finish(behind)
    forged = JsonClient(f"{c.ws}/ws/streaming/forged?resume={first['ticket_id']}.{'0' * 32}")
    async with forged:
        await forged.send("prefill", messages=USER)
        err = await forged.recv()
        assert err["type"] == "error" and err["code"] == "invalid_resume_token"
        with pytest.raises(ConnectionClosed):
            await forged.recv()
        assert forged.ws.close_code == 1008
    c.wait_idle(2)
