"""A duplex session on the session runtime with a fake engine: phases, units, pause, stop, bad input."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import numpy as np
import pytest

from fake_duplex_engine import FakeDuplexEngine
from memsocket import MemorySocket
from omnivox.audio.pcm import b64_to_pcm16, float32_to_b64, pcm16_to_b64
from omnivox.connection.runtime import Connection
from omnivox.core.config import Settings
from omnivox.core.errors import InvalidAudio
from omnivox.protocol.control.workers import WorkerState
from omnivox.protocol.duplex import DUPLEX
from omnivox.video.frames import encode_jpeg, encode_png
from omnivox.worker.duplex.session import DuplexSession, Phase
from omnivox.worker.handler import SessionInfo
from omnivox.worker.host import EngineHost


def second(rate: int = 16000, seconds: float = 1.0) -> np.ndarray:
    t = np.arange(int(rate * seconds), dtype=np.float32) / rate
    return (0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


CHUNK = float32_to_b64(second())


class Client:
    def __init__(self, socket: MemorySocket) -> None:
        self.socket = socket
        self.read = 0
        self.metrics: list[dict] = []  # the internal metrics frames meant for the gateway

    def send(self, type: str, **fields) -> None:
        self.socket.feed(json.dumps({"type": type, **fields}))

    def chunk(self, **fields) -> None:
        self.send("audio_chunk", **{"audio_base64": CHUNK, **fields})

    async def next(self, timeout: float = 5.0) -> dict:
        while True:
            async with asyncio.timeout(timeout):
                while self.read >= len(self.socket.sent):
                    self.socket.wrote.clear()
                    await self.socket.wrote.wait()
            event = json.loads(self.socket.sent[self.read])
            self.read += 1
            if event["type"] != "omnivox.internal.metrics":
                return event
            self.metrics.append(event)

    async def until(self, type: str, timeout: float = 5.0) -> list[dict]:
        out = []
        while True:
            out.append(await self.next(timeout))
            if out[-1]["type"] == type:
                return out

    def unread(self) -> list[dict]:
        return [json.loads(f) for f in self.socket.sent[self.read :]]


@dataclass
class Session:
    client: Client
    engine: FakeDuplexEngine
    handler: DuplexSession
    host: EngineHost
    socket: MemorySocket
    running: asyncio.Task

    async def ended(self) -> None:
        await asyncio.wait_for(asyncio.shield(self.running), 5)


async def _until(check: Callable[[], bool], within_s: float = 10.0) -> None:
    """Let the session run until ``check()`` holds (at most ``within_s``: a busy machine runs its
    threads late); the test's assertions then say what was not reached."""
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(0.01)


async def held_in_the_engine(engine: FakeDuplexEngine) -> None:
    """Until the first unit's prefill is in the engine (held there by its gate)."""
    await _until(lambda: "prefill" in engine.names())


async def piled_up(s: Session, chunks: int) -> None:
    """Until ``chunks`` chunks wait for the next unit."""
    await _until(lambda: s.handler.loop is not None and s.handler.loop.waiting == chunks)


@pytest.fixture
async def make_session() -> AsyncIterator:
    made: list[Session] = []

    async def make(
        engine: FakeDuplexEngine | None = None,
        session_id: str = "s1",
        prepare: dict | None = None,
        **settings,
    ) -> Session:
        engine = engine or FakeDuplexEngine()
        host = EngineHost(engine)
        await host.load()
        await host.acquire()
        host.transition(WorkerState.DUPLEX_ACTIVE)
        socket = MemorySocket()
        conn = Connection(socket, DUPLEX)
        info = SessionInfo(session_id, behind_gateway=True)
        handler = DuplexSession(conn, host, Settings(**settings), info)
        running = asyncio.create_task(conn.run(handler.on_frame, handler.main()))
        session = Session(Client(socket), engine, handler, host, socket, running)
        made.append(session)
        if prepare is not None:
            session.client.send("prepare", **prepare)
            await session.client.until("prepared")
        return session

    yield make
    for s in made:
        s.socket.hang_up()
        await asyncio.wait_for(asyncio.shield(s.running), 5)
        await s.handler.close()
        await s.host.release()
        await s.host.close()


async def test_prepare_reports_the_effective_config_and_ignored_keys(make_session) -> None:
    s = await make_session()
    s.client.send("prepare", system_prompt="be brief", config={"chunk_ms": 500, "colour": "blue"})
    prepared = await s.client.next()
    assert prepared["type"] == "prepared" and prepared["session_id"] == "s1"
    assert prepared["config"]["chunk_ms"] == 500 and prepared["config"]["force_listen_count"] == 3
    assert "colour" not in prepared["config"]
    assert prepared["warnings"] == ["unknown config key 'colour' ignored"]
    assert prepared["mode"] == "audio" and prepared["vision"] is False and prepared["deferred_finalize"]
    assert s.engine.calls == [("prepare", "be brief")]
    assert s.handler.phase.state is Phase.ACTIVE


async def test_omni_ids_see_frames_and_an_engine_without_vision_says_it_ignores_them(make_session) -> None:
    omni = await make_session(session_id="omni_1", prepare={})
    assert json.loads(omni.socket.sent[0])["vision"] is True
    blind = await make_session(FakeDuplexEngine(vision=False), session_id="omni_2", prepare={})
    prepared = json.loads(blind.socket.sent[0])
    assert prepared["mode"] == "omni" and prepared["vision"] is False
    assert prepared["warnings"] == ["frames are accepted and ignored"]


async def test_a_bad_config_value_names_the_field(make_session) -> None:
    s = await make_session()
    s.client.send("prepare", config={"chunk_ms": 5})
    err = await s.client.next()
    assert err["type"] == "error" and err["code"] == "invalid_message"
    assert err["details"]["param"] == "config.chunk_ms"
    s.client.send("prepare", config={"sample_rate": 12345})
    err = await s.client.next()
    assert err["details"]["param"] == "config.sample_rate"
    s.client.send("prepare", config={})  # still usable
    assert (await s.client.next())["type"] == "prepared"


async def test_units_listen_first_then_speak_with_audio(make_session) -> None:
    s = await make_session(prepare={"config": {"force_listen_count": 2}})
    results = []
    for _ in range(5):
        s.client.chunk()
        results.append(await s.client.next())
    assert [r["unit_index"] for r in results] == [0, 1, 2, 3, 4]
    assert [r["is_listen"] for r in results] == [True, True, False, False, False]
    assert "".join(r["text"] for r in results) == "hello there friend"
    assert [r["end_of_turn"] for r in results] == [False, False, False, False, True]
    assert [r["current_time"] for r in results] == [1.0, 2.0, 3.0, 4.0, 5.0]
    speech = b64_to_pcm16(results[2]["audio_data"])
    assert results[2]["audio_sample_rate"] == 24000 and len(speech) == 2400 and np.abs(speech).max() > 0.1
    assert "audio_data" not in results[0]
    assert all(r["kv_cache_length"] > 0 and r["wall_clock_ms"] >= 0 for r in results)
    assert [r["lagging"] for r in results] == [False] * 5
    assert s.engine.names()[1:7] == ["prefill", "generate", "finalize", "prefill", "generate", "finalize"]
    # each unit is reported to the gateway's metrics
    assert [m["unit_spoke"] for m in s.client.metrics] == [False, False, True, True]
    assert all(m["unit_wall_clock_s"] >= 0 and m["unit_lagging"] is False for m in s.client.metrics)


async def test_force_listen_from_the_client_and_no_audio_when_not_asked(make_session) -> None:
    s = await make_session(prepare={"config": {"force_listen_count": 0, "generate_audio": False}})
    s.client.chunk(force_listen=True)
    assert (await s.client.next())["is_listen"] is True
    s.client.chunk()
    spoken = await s.client.next()
    assert spoken["is_listen"] is False and spoken["text"] and "audio_data" not in spoken


async def test_deferred_finalize_sends_the_result_before_finalizing(make_session) -> None:
    engine = FakeDuplexEngine(finalize_s=0.3)
    s = await make_session(engine, prepare={"config": {"force_listen_count": 0}})
    s.client.chunk()
    first = await s.client.next()
    assert first["cost_finalize_ms"] == 0  # no unit before it
    assert engine.names().count("finalize") == 0  # the result went out first
    s.client.chunk()
    second_ = await s.client.next()
    # the barrier: the second unit's prefill came after the first unit's finalize
    assert engine.names()[1:5] == ["prefill", "generate", "finalize", "prefill"]
    assert second_["cost_finalize_ms"] >= 250  # the previous unit's finalize


async def test_without_deferred_finalize_the_result_waits_for_it(make_session) -> None:
    engine = FakeDuplexEngine(finalize_s=0.2)
    s = await make_session(engine, prepare={"deferred_finalize": False})
    s.client.chunk()
    result = await s.client.next()
    assert engine.names()[-1] == "finalize" and result["cost_finalize_ms"] >= 150


async def test_chunks_that_pile_up_are_merged_into_one_lagging_unit(make_session) -> None:
    engine = FakeDuplexEngine()
    s = await make_session(engine, prepare={})
    engine.gate = threading.Event()
    s.client.chunk()
    await held_in_the_engine(engine)
    for _ in range(3):
        s.client.chunk()
    await piled_up(s, 3)
    engine.gate.set()
    first, merged = await s.client.next(), await s.client.next()
    assert first["lagging"] is False and first["merged_chunks"] == 1
    assert merged["lagging"] is True and merged["merged_chunks"] == 3
    assert merged["current_time"] == 4.0
    assert [d for n, d in engine.calls if n == "prefill"] == [(16000, 0), (48000, 0)]
    assert s.handler.loop is not None and s.handler.loop.lagging_units == 1


async def test_audio_beyond_the_lag_bound_is_dropped_oldest_first(make_session) -> None:
    engine = FakeDuplexEngine()
    s = await make_session(engine, prepare={}, duplex_max_lag_ms=2000)
    engine.gate = threading.Event()
    s.client.chunk()
    await held_in_the_engine(engine)
    for _ in range(4):
        s.client.chunk()
    await piled_up(s, 4)
    engine.gate.set()
    await s.client.next()
    merged = await s.client.next()
    assert merged["merged_chunks"] == 4
    assert [d for n, d in engine.calls if n == "prefill"][1] == (32000, 0)
    assert s.handler.loop is not None and s.handler.loop.dropped_ms == 2000


async def test_other_sample_rates_and_pcm16_are_heard_at_16_khz(make_session) -> None:
    s = await make_session(prepare={"config": {"sample_rate": 24000}})
    for _ in range(3):
        s.client.chunk(audio_base64=pcm16_to_b64(second(24000)), format="pcm16")
        await s.client.next()
    heard = sum(d[0] for n, d in s.engine.calls if n == "prefill")
    assert 47000 < heard <= 48000  # the stream resampler holds back only its filter delay (~33 ms)


async def test_frames_reach_an_omni_engine_latest_first_and_bounded(make_session) -> None:
    s = await make_session(session_id="omni_x", prepare={}, duplex_max_frames=2)
    red = np.zeros((48, 64, 3), np.uint8)
    red[..., 0] = 255
    frames = [base64.b64encode(encode_jpeg(red)).decode(), base64.b64encode(encode_png(red)).decode()] * 2
    s.client.chunk(frame_base64_list=frames)
    await s.client.next()
    assert [d for n, d in s.engine.calls if n == "prefill"] == [(16000, 2)]


async def test_audio_mode_ignores_frames(make_session) -> None:
    s = await make_session(prepare={})
    s.client.chunk(frame_base64_list=["not even base64!"])
    assert (await s.client.next())["type"] == "result"
    assert [d for n, d in s.engine.calls if n == "prefill"] == [(16000, 0)]


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"audio_base64": "@@@"}, "invalid_audio"),
        ({"audio_base64": base64.b64encode(b"\x00" * 6).decode()}, "invalid_audio"),  # 1.5 floats
        ({"audio_base64": base64.b64encode(b"\x00" * 3).decode(), "format": "pcm16"}, "invalid_audio"),
        ({"audio_base64": ""}, "invalid_audio"),
        ({"audio_base64": base64.b64encode(np.full(9, np.nan, "<f4").tobytes()).decode()}, "invalid_audio"),
        ({"audio_base64": float32_to_b64(second(seconds=11))}, "invalid_audio"),
        ({"frame_base64_list": ["%%%"]}, "invalid_image"),
        ({"frame_base64_list": [base64.b64encode(b"GIF89a....").decode()]}, "invalid_image"),
        ({"frame_base64_list": [base64.b64encode(b"\xff\xd8\xff\xe0broken").decode()]}, "invalid_image"),
        ({"format": "mp3"}, "invalid_message"),
    ],
)
async def test_a_bad_chunk_gets_an_error_and_the_session_goes_on(make_session, fields, code) -> None:
    s = await make_session(session_id="omni_bad", prepare={})
    s.client.chunk(**fields)
    err = await s.client.next()
    assert err["type"] == "error" and err["code"] == code, err
    s.client.chunk()
    assert (await s.client.next())["type"] == "result"
    assert s.engine.names().count("prefill") == 1  # the bad chunk reached no model


async def test_an_image_over_the_pixel_limit_is_refused_before_decoding(make_session) -> None:
    s = await make_session(session_id="omni_big", prepare={}, max_image_pixels=64 * 64)
    big = base64.b64encode(encode_png(np.zeros((100, 100, 3), np.uint8))).decode()
    s.client.chunk(frame_base64_list=[big])
    err = await s.client.next()
    assert err["code"] == "invalid_image" and "exceeds the limit" in err["message"]


async def test_out_of_order_messages_get_clear_errors(make_session) -> None:
    s = await make_session()
    s.client.chunk()
    assert (await s.client.next())["code"] == "prepare_required"
    s.client.send("pause")
    assert (await s.client.next())["code"] == "prepare_required"
    s.client.send("prepare")
    await s.client.until("prepared")
    s.client.send("prepare")
    assert (await s.client.next())["code"] == "already_prepared"
    s.client.send("resume")
    assert (await s.client.next())["code"] == "not_paused"
    s.client.send("dance")
    assert (await s.client.next())["code"] == "unknown_type"
    s.client.socket.feed("{nope")
    assert (await s.client.next())["code"] == "invalid_json"
    s.client.send("client_diagnostic", metrics={"buffer_ms": 120})
    s.client.chunk()
    assert (await s.client.next())["type"] == "result"  # the diagnostic got no answer
    assert s.handler.diagnostics == {"buffer_ms": 120}


async def test_pause_and_resume_move_the_worker_and_tell_the_gateway(make_session) -> None:
    s = await make_session(prepare={})
    s.client.send("pause", timeout=30)
    events = await s.client.until("paused")
    assert events[-1]["timeout_s"] == 30
    internal = [e for e in events if e["type"] == "omnivox.internal.pause"]
    assert internal == [{"type": "omnivox.internal.pause", "paused": True}]
    assert s.host.state is WorkerState.DUPLEX_PAUSED and s.handler.phase.state is Phase.PAUSED
    s.client.chunk()
    assert (await s.client.next())["code"] == "session_paused"
    s.client.send("resume")
    events = await s.client.until("resumed")
    assert {"type": "omnivox.internal.pause", "paused": False} in events
    assert s.host.state is WorkerState.DUPLEX_ACTIVE
    s.client.chunk()
    assert (await s.client.next())["type"] == "result"


async def test_a_pause_that_times_out_releases_the_session(make_session) -> None:
    s = await make_session(prepare={})
    s.client.send("pause", timeout=0.2)
    await s.client.until("paused")
    events = await s.client.until("timeout")
    assert events[-1]["reason"] == "pause_timeout"
    await s.ended()
    assert s.socket.closed_with == 1000
    assert s.engine.names().count("cleanup") == 1


async def test_the_pause_timeout_is_capped_by_the_server(make_session) -> None:
    s = await make_session(prepare={}, duplex_max_pause_s=5)
    s.client.send("pause", timeout=3600)
    assert (await s.client.until("paused"))[-1]["timeout_s"] == 5


async def test_stop_cleans_up_once_and_closes(make_session) -> None:
    s = await make_session(prepare={})
    s.client.chunk()
    await s.client.next()
    s.client.send("stop")
    stopped = await s.client.until("stopped")
    assert stopped[-1] == {"type": "stopped", "session_id": "s1", "units": 1}
    await s.ended()
    assert s.socket.closed_with == 1000
    await s.handler.close()
    assert s.engine.names().count("cleanup") == 1 and s.handler.phase.state is Phase.STOPPED


async def test_a_client_that_vanishes_mid_unit_still_gets_cleaned_up(make_session) -> None:
    engine = FakeDuplexEngine(unit_s=0.3)
    s = await make_session(engine, prepare={})
    s.client.chunk()
    await asyncio.sleep(0.1)
    s.socket.hang_up()
    await s.ended()
    await s.handler.close()
    assert engine.names()[-1] == "cleanup"  # after the unit in flight


async def test_a_recoverable_unit_failure_is_reported_and_units_go_on(make_session) -> None:
    engine = FakeDuplexEngine()
    engine.fail_at = 0
    engine.fail_with = InvalidAudio("the model could not hear that")
    s = await make_session(engine, prepare={})
    s.client.chunk()
    assert (await s.client.next())["code"] == "invalid_audio"
    s.client.chunk()
    assert (await s.client.next())["type"] == "result"


async def test_an_engine_fault_ends_the_session_with_1011(make_session) -> None:
    engine = FakeDuplexEngine()
    engine.fail_at = 0
    s = await make_session(engine, prepare={})
    s.client.chunk()
    assert (await s.client.next())["code"] == "engine_error"
    await s.ended()
    assert s.socket.closed_with == 1011
