"""Bad input and faults on the streaming endpoint: each gets a clear error, nobody else suffers."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from cluster import cluster
from wsclient import StreamingClient

LONG = [{"role": "user", "content": " ".join(f"word{i}" for i in range(400))}]
SHORT = [{"role": "user", "content": "hi there"}]


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    """Two echo workers that take 20 ms a word, and a small message limit."""
    with cluster(
        workers=2,
        log_dir=tmp_path_factory.mktemp("logs"),
        OMNIVOX_ECHO_DELAY_S="0.02",
        OMNIVOX_MAX_MESSAGE_BYTES="4096",
    ) as c:
        yield c


def worker_states(c) -> list[str]:
    return [w["state"] for w in c.workers_view()]


async def wait_states(c, predicate, timeout: float = 5.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate(worker_states(c)):
            return time.monotonic() - start
        await asyncio.sleep(0.05)
    raise AssertionError(f"states stayed {worker_states(c)}")


async def test_malformed_messages_get_codes_and_session_survives(slow):
    async with StreamingClient(slow.ws, "bad") as cl:
        cases = [
            ("{not json", "invalid_json"),
            (json.dumps([1, 2]), "invalid_message"),
            (json.dumps({"no": "type"}), "invalid_message"),
            (json.dumps({"type": "dance"}), "unknown_type"),
            (json.dumps({"type": "prefill"}), "invalid_message"),  # missing messages
            (json.dumps({"type": "prefill", "messages": "hello"}), "invalid_message"),  # mistyped
            (
                json.dumps({"type": "prefill", "messages": [{"role": "robot", "content": "x"}]}),
                "invalid_message",
            ),
            (json.dumps({"type": "generate", "max_new_tokens": "many"}), "invalid_message"),
            (
                json.dumps({"type": "prefill", "messages": [{"role": "user", "content": "x" * 5000}]}),
                "message_too_large",
            ),
            (json.dumps({"type": "generate"}), "prefill_required"),
        ]
        for raw, code in cases:
            await cl.ws.send(raw)
            err = await cl.recv()
            assert err["type"] == "error" and err["code"] == code, (raw[:40], err)
            assert err["message"]
        result = await cl.turn(SHORT)  # still usable
        assert result["text"] == "(echo) hi there"


async def test_second_generate_while_running_is_refused(slow):
    async with StreamingClient(slow.ws, "twice") as cl:
        await cl.send("prefill", messages=LONG)
        await cl.until("prefill_done")
        await cl.send("generate")
        await cl.send("generate")
        got = await cl.until("error")
        assert got[-1]["code"] == "generation_in_progress"
        await cl.send("stop")
        done = (await cl.until("done"))[-1]
        assert done["stopped"] is True


async def test_stop_halts_generation_within_a_chunk(slow):
    async with StreamingClient(slow.ws, "stopper") as cl:
        await cl.send("prefill", messages=LONG)
        await cl.until("prefill_done")
        await cl.send("generate", max_new_tokens=1000)
        await cl.until("chunk")
        await cl.send("stop")
        stop_sent = time.monotonic()
        rest = await cl.until("done")
        assert time.monotonic() - stop_sent < 1.0
        done = rest[-1]
        assert done["stopped"] is True
        assert done["token_stats"]["generated_tokens"] < 100  # far fewer than the 401 words
        # the stopped reply is what the worker holds: the next turn is a cache hit on it
        history = [*LONG, {"role": "assistant", "content": done["text"]}, *SHORT]
        nxt = await cl.turn(history)
        assert nxt["prefill_done"]["cache_hit"] is True
        assert nxt["prefill_done"]["cached_tokens"] > 0


@pytest.mark.parametrize("when", ["prefilling", "generating"])
async def test_client_vanishing_releases_worker_within_a_second(slow, when):
    await wait_states(slow, lambda s: s.count("IDLE") == 2)
    cl = StreamingClient(slow.ws, f"vanish-{when}")
    await cl.__aenter__()
    await cl.send("prefill", messages=LONG)
    if when == "generating":
        await cl.until("prefill_done")
        await cl.send("generate", max_new_tokens=1000)
        await cl.until("chunk")
    await wait_states(slow, lambda s: "BUSY_STREAMING" in s)
    await cl.ws.close()
    released = await wait_states(slow, lambda s: s.count("IDLE") == 2)
    assert released < 1.0
    async with StreamingClient(slow.ws, "after") as ok:  # everyone else is still served
        assert (await ok.turn(SHORT))["text"] == "(echo) hi there"


async def test_worker_killed_mid_generation(tmp_path):
    with cluster(workers=2, log_dir=tmp_path, OMNIVOX_ECHO_DELAY_S="0.02") as c:
        async with StreamingClient(c.ws, "victim") as cl, StreamingClient(c.ws, "bystander") as other:
            await cl.send("prefill", messages=LONG)
            pd = (await cl.until("prefill_done"))[-1]
            await cl.send("generate", max_new_tokens=1000)
            await cl.until("chunk")
            index = next(i for i, w in enumerate(c.workers_view()) if w["worker_id"] == pd["worker_id"])
            url = c.workers_view()[index]["url"]
            c.workers[c.worker_urls.index(url)].kill()
            err = (await cl.until("error"))[-1]
            assert err["code"] == "worker_lost"
            view = {w["worker_id"]: w["state"] for w in c.workers_view()}
            assert view[pd["worker_id"]] == "OFFLINE"
            # the session can go on: its next turn lands on the surviving worker
            again = await cl.turn(SHORT)
            assert again["text"] == "(echo) hi there"
            assert again["prefill_done"]["worker_id"] != pd["worker_id"]
            assert (await other.turn(SHORT))["done"]["type"] == "done"
        metrics = httpx.get(c.url + "/metrics").text
        assert 'omnivox_errors_total{code="worker_lost"} 1.0' in metrics
