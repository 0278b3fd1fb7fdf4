"""``omnivox serve --pipeline cascade --workers 1 --seats 3``: one light worker process hosting three
seats, each a worker to the real gateway (issue 23, capacity). Concurrent realtime sessions land on
the seats and hear only their own caller; a caller that vanishes mid-sentence costs no other seat's
session, and its seat is released and taken again; each seat fences its own epochs; a path naming
no seat is a clear 404. Echo LLM (the reply says what was heard), Whisper and hibari on the stages.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from omnivox.audio.pcm import pcm16_to_b64
from omnivox.protocol.control.internal import GATEWAY_HEADER
from pipeline_served import Served

from ..rtclient import Events, silence, speech
from .test_pipeline_serve import talk  # (a caller's whole turn, unpaced)

SEATS = 3
WORKER_KEY = "seats-worker-key"  # (so the test may knock on the worker itself)
WORKER_AUTH = {"Authorization": f"Bearer {WORKER_KEY}"}
SENTENCES = [
    "Please remind me to call my sister.",
    "What is the weather like in Paris today?",
    "Turn on the kitchen lights please.",
]
WORDS = ["sister", "weather", "kitchen"]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    s = Served(
        tmp_path_factory.mktemp("pipeline-seats"),
        workers=1,
        seats=SEATS,
        env={"OMNIVOX_WORKER_KEY": WORKER_KEY, "OMNIVOX_PIPELINE_LOST_AFTER_S": "30"},
    )
    try:
        s.wait(s.ready)
        yield s
    finally:
        s.stop()


def workers(served: Served) -> list[dict[str, Any]]:
    return sorted(httpx.get(served.url + "/api/workers", timeout=5).json()["workers"], key=lambda w: w["url"])


def wait_workers(served: Served, ok, timeout: float = 60.0) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not ok(seen := workers(served)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"workers: {seen}")
        time.sleep(0.2)
    return seen


async def vanish(served: Served, text: str) -> None:
    """A caller whose connection drops mid-sentence: no close, the TCP connection just goes."""
    async with websockets.connect(served.ws + "/v1/realtime") as ws:
        while json.loads(await ws.recv())["type"] != "session.created":
            pass
        audio = np.concatenate([silence(0.3), speech(text)])
        half = len(audio) // 2
        for i in range(0, half, 960):
            await ws.send(
                json.dumps({"type": "input_audio_buffer.append", "audio": pcm16_to_b64(audio[i : i + 960])})
            )
            await asyncio.sleep(0.04)
        ws.transport.abort()


def said(events: Events) -> tuple[str, str]:
    heard = events.of("conversation.item.input_audio_transcription.completed")[0].transcript
    reply = events.of("response.output_audio_transcript.done")[0].transcript
    return heard.lower(), reply.lower()


def test_the_gateway_sees_each_seat_as_a_worker(served) -> None:
    seen = workers(served)
    assert len(seen) == SEATS and all(w["state"] == "IDLE" for w in seen)
    bases = {w["url"].rsplit("/seats/", 1)[0] for w in seen}
    assert len(bases) == 1  # one process, one port
    (base,) = bases
    assert [w["url"] for w in seen] == [f"{base}/seats/{i}" for i in range(SEATS)]
    assert len({w["worker_id"] for w in seen}) == SEATS
    assert served.health()["workers_idle"] == SEATS


async def test_seats_serve_callers_at_once_and_a_vanished_one_costs_no_other(served) -> None:
    first = await asyncio.gather(
        talk(served, SENTENCES[0]), talk(served, SENTENCES[1]), vanish(served, SENTENCES[2])
    )
    for events, word in zip(first[:2], WORDS, strict=False):
        heard, reply = said(events)
        assert word in heard and word in reply, (heard, reply)  # its own words, nobody else's
        assert all(e.type != "error" for _, e in events.seen), events.seen
        assert events.of("response.done")[0].response.status == "completed"
    # the vanished caller's seat is released (and its ASR slot): every seat idle, none leaked
    served.wait(lambda h: h["workers_idle"] == SEATS and h["pipeline"]["session_slots_used"] == 0)
    after_first = wait_workers(served, lambda ws: sum(w["sessions_served"] for w in ws) == 3)
    assert all(w["sessions_served"] == 1 for w in after_first)  # three sessions at once: a seat each
    # and every seat takes the next caller, the vanished one's included
    second = await asyncio.gather(*(talk(served, s) for s in SENTENCES))
    for events, word in zip(second, WORDS, strict=True):
        heard, reply = said(events)
        assert word in heard and word in reply, (heard, reply)
    seen = wait_workers(
        served, lambda ws: all(w["sessions_served"] == 2 and w["state"] == "IDLE" for w in ws)
    )
    assert all(w["epoch"] >= 2 for w in seen)  # each seat's own assignments, fenced on it


async def test_each_seat_fences_its_own_epochs_and_a_bad_seat_path_is_a_404(served) -> None:
    seen = wait_workers(served, lambda ws: all(w["state"] == "IDLE" for w in ws))
    base = seen[0]["url"].rsplit("/seats/", 1)[0]
    async with httpx.AsyncClient(headers=WORKER_AUTH, timeout=5) as http:
        for bad in (str(SEATS), "01", "x"):
            reply = await http.get(f"{base}/seats/{bad}/health")
            assert reply.status_code == 404 and reply.json()["detail"]["code"] == "unknown_seat"
        seat_epochs = [(await http.get(w["url"] + "/health")).json()["epoch"] for w in seen]
    ws_base = base.replace("http://", "ws://")
    headers = {**WORKER_AUTH, GATEWAY_HEADER: "1"}
    with pytest.raises(InvalidStatus) as refused:  # a seat that is not there: before any session
        async with websockets.connect(
            f"{ws_base}/seats/{SEATS}/ws/realtime?epoch=99", additional_headers=headers
        ):
            pass
    assert refused.value.response.status_code == 404
    assert json.loads(refused.value.response.body)["code"] == "unknown_seat"
    # seat 0 refuses an assignment no newer than its own newest (whatever the other seats have seen)
    with pytest.raises(InvalidStatus) as stale:
        async with websockets.connect(
            f"{ws_base}/seats/0/ws/realtime?epoch={seat_epochs[0]}", additional_headers=headers
        ):
            pass
    assert stale.value.response.status_code == 409
    assert json.loads(stale.value.response.body)["code"] == "stale_assignment"
    # nothing of it cost a seat: the gateway still sees them idle with the epochs they had
    after = wait_workers(served, lambda ws: all(w["state"] == "IDLE" for w in ws))
    assert [w["epoch"] for w in after] == seat_epochs
