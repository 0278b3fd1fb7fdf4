"""A worker whose LLM server is down: said at start and in /health, and the caller hears an apology.

The worker's ``--llm-url`` points at a port nothing listens on. Everything else is real: the
gateway, a cascade worker (PocketSphinx, hibari), the official ``openai`` SDK as the client.
"""

from __future__ import annotations

import httpx
import pytest

from cluster import cluster, free_port
from omnivox.core.config import Settings
from rtclient import Events, audio_of, client


@pytest.fixture(scope="module")
def llm_down(tmp_path_factory):
    env = {
        "OMNIVOX_LLM_URL": f"http://127.0.0.1:{free_port()}/v1",  # nothing listens there
        "OMNIVOX_ASR": "pocketsphinx",
        "OMNIVOX_DEPENDENCY_CHECK_S": "1",
    }
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("down"), **env) as c:
        yield c


def test_an_unreachable_llm_server_is_said_in_health_and_at_start(llm_down):
    health = llm_down.wait(lambda h: h["status"] == "degraded" and h["problems"], timeout=30)
    assert health["workers_usable"] == 1  # the worker still serves (an apology)
    assert "the llm server http://127.0.0.1:" in health["problems"][0]
    assert "cannot be reached" in health["problems"][0]
    worker_log = next(llm_down.log_dir.glob("worker*"))
    assert "cannot be reached" in worker_log.read_text()  # a warning when it started
    models = httpx.get(llm_down.url + "/v1/models", timeout=5).json()
    assert [m["id"] for m in models["data"]] == ["omnivox", "cascade"]


async def test_a_reply_that_cannot_be_made_is_a_spoken_apology_not_silence_or_an_error(llm_down):
    async with client(llm_down.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        await conn.conversation.item.create(
            item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
        )
        await conn.response.create()
        done = await events.wait_for("response.done", timeout=60)
        await events.stop()
    assert done.response.status == "completed"
    transcript = done.response.output[0].content[0].transcript
    assert transcript == Settings().failure_apology
    assert audio_of(events, done.response.id).size > 24000 * 0.5  # said out loud
    assert not events.of("error")
