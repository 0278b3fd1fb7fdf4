"""Recording under bad input and faults: a worker killed mid-reply, a data directory that cannot be
written or is full, cleanup (command line and the gateway's task) while a session records, path
traversal in ids and file paths, a recording deleted while it is replayed, who may read what."""

from __future__ import annotations

import asyncio
import http.client
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from cluster import cluster
from recordings import finished, recording_env, rms, stereo
from rtclient import Events, client, silence, speech, stream
from wsclient import StreamingClient

STORY = "tell me a long story about a brave little fox who lived in the forest by the river"


async def chat(c, session_id: str, *texts: str) -> None:
    """A turn-based session saying each of ``texts`` (the echo engine answers at once)."""
    async with StreamingClient(c.ws, session_id) as cl:
        messages: list[dict] = []
        for text in texts:
            messages.append({"role": "user", "content": text})
            reply = await cl.turn(messages)
            assert "error" not in reply, reply
            messages.append({"role": "assistant", "content": reply["text"]})


def cleanup_cli(data_dir: Path, *flags: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "omnivox", "recordings", "cleanup", "--data-dir", str(data_dir), *flags],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def raw_get(url: str, path: str, method: str = "GET", headers: dict | None = None) -> tuple[int, bytes]:
    """A request whose path goes out exactly as written (HTTP clients tidy ``..`` away)."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


# ---- a worker lost mid-reply


async def test_a_session_whose_worker_dies_mid_reply_is_finalized_and_playable(tmp_path):
    env = recording_env(tmp_path / "data")
    with cluster(workers=1, engine="cascade", log_dir=tmp_path, **env) as c:
        async with client(c.ws).realtime.connect(
            model="omnivox", extra_query={"session_id": "doomed"}
        ) as conn:
            events = Events(conn)
            await events.wait_for("session.created")
            await stream(conn, np.concatenate([speech(STORY), silence(0.8)]), chunk_ms=40, speed=2)
            await events.wait_for("response.output_audio.delta")
            await asyncio.sleep(1.0)  # a second of the reply has been heard
            c.workers[0].kill()
            lost = await events.wait_for("error", timeout=15)
            assert lost.error.code == "worker_lost"
            await events.stop()
        detail = finished(c.url, "doomed", {})
    meta = detail["meta"]
    assert meta["outcome"]["reason"] == "worker_lost" and "worker_lost" in meta["outcome"]["errors"]
    assert meta["status"] == "complete" and meta["replay"]["wav"]
    reply = next(t for t in detail["timeline"]["turns"] if t["role"] == "assistant")
    assert reply["status"] == "unfinished" and reply["text"]
    lost_at = next(e["t"] for e in detail["timeline"]["events"] if e.get("code") == "worker_lost")
    left, right = stereo((tmp_path / "data" / "sessions" / "doomed" / "merged_replay.wav").read_bytes())
    assert rms(left, 0, lost_at) > 0.02 and rms(right, reply["start"], reply["end"]) > 0.02
    assert len(right) / 24000 == pytest.approx(detail["timeline"]["duration_s"], abs=0.05)


async def test_a_gateway_killed_mid_session_finishes_its_recordings_when_it_restarts(tmp_path):
    """Issue 25, finding 8: restarted within 10 minutes, the cut sessions stayed "recording"."""
    env = recording_env(tmp_path / "data")
    with cluster(workers=1, engine="echo", log_dir=tmp_path, **env) as c:
        async with StreamingClient(c.ws, "cut-short", timeout=30) as cl:
            assert "error" not in await cl.turn([{"role": "user", "content": "hello there"}])
            journal = tmp_path / "data" / "sessions" / "cut-short" / "timeline.jsonl"
            for _ in range(200):  # the recorder writes on its own threads: until the reply is in it
                if journal.exists() and journal.read_text().count('"turn_end"') >= 2:
                    break
                await asyncio.sleep(0.05)
            c.gateway.kill()
            c.gateway.wait(10)
        c.start_gateway()
        detail = finished(c.url, "cut-short", timeout=15)
    assert detail["meta"]["outcome"]["reason"] == "recorder_stopped"
    assert [t["role"] for t in detail["timeline"]["turns"]][:2] == ["user", "assistant"]


# ---- a disk that cannot take it


@pytest.mark.parametrize("fault", ["unwritable", "full"])
async def test_sessions_run_on_when_recordings_cannot_be_written(tmp_path, fault):
    if fault == "unwritable":
        blocker = tmp_path / "a-file"
        blocker.write_text("not a directory")
        env = recording_env(blocker / "data")  # mkdir fails whoever runs it (root ignores modes)
    else:
        env = recording_env(tmp_path / "data", OMNIVOX_RECORD_MIN_FREE_MB=str(2**40))  # never enough
    with cluster(workers=1, engine="echo", log_dir=tmp_path, **env) as c:
        for n in range(3):
            await chat(c, f"s{n}", "hello", "and again")  # each session serves every turn
        # the recorder fails on its writer threads, after the session's words: wait for the third
        # failure (10 s at most), then say what was counted
        deadline = time.monotonic() + 10
        while "omnivox_recording_failures_total 3.0" not in (metrics := httpx.get(c.url + "/metrics").text):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
    assert "omnivox_recording_failures_total 3.0" in metrics  # once per session, not per chunk
    log = (tmp_path / "gateway.log").read_text()
    assert log.count("recording of session") == 1, log  # logged once, not per session or chunk
    assert "the session goes on" in log
    if fault == "full":
        assert not any((tmp_path / "data" / "sessions").iterdir())


# ---- cleanup never takes a live session


async def test_cleanup_from_the_command_line_leaves_a_live_session_alone(tmp_path):
    data = tmp_path / "data"
    with cluster(workers=2, engine="echo", **recording_env(data)) as c:
        await chat(c, "old", "hello")
        finished(c.url, "old", {})
        async with StreamingClient(c.ws, "live") as cl:
            messages = [{"role": "user", "content": "still talking"}]
            await cl.turn(messages)
            # the recorder writes on its own threads, after the reply went out: wait (10 s at most)
            # until the turn is in what it holds so far, then say what that is
            for _ in range(100):
                so_far = httpx.get(c.url + "/api/recordings/live")
                turns = so_far.json()["timeline"]["turns"] if so_far.status_code == 200 else []
                if [t.get("text") for t in turns][:1] == ["still talking"]:
                    break
                await asyncio.sleep(0.1)
            assert (data / "sessions" / "live").is_dir()
            now = httpx.get(c.url + "/api/recordings/live").json()  # what it holds so far
            assert now["live"] and now["meta"]["status"] == "recording" and now["media"]["wav"] is None
            assert [t["text"] for t in now["timeline"]["turns"]][:1] == ["still talking"]
            assert httpx.delete(c.url + "/api/recordings/live").status_code == 409
            dry = cleanup_cli(data, "--retention-days", "0", "--dry-run")
            assert "would remove old (age;" in dry and "live" not in dry.split("\n")[0]
            assert "1 being recorded" in dry and (data / "sessions" / "old").is_dir()
            out = cleanup_cli(data, "--retention-days", "0")
            assert out.startswith("removed old (age;") and "1 being recorded" in out
            assert not (data / "sessions" / "old").exists()
            messages += [
                {"role": "assistant", "content": "(echo) still talking"},
                {"role": "user", "content": "more"},
            ]
            await cl.turn(messages)  # it goes on recording
        detail = finished(c.url, "live", {})
        assert [t["text"] for t in detail["timeline"]["turns"] if t["role"] == "user"] == [
            "still talking",
            "more",
        ]
        assert "removed live (age;" in cleanup_cli(data, "--retention-days", "0")
        assert httpx.get(c.url + "/api/recordings").json()["recordings"] == []


async def test_the_gateway_cleans_up_in_the_background_but_never_a_live_session(tmp_path):
    data = tmp_path / "data"
    # kept two seconds after it ends (long enough to read it here); cleaned every 0.3 s
    env = recording_env(data, OMNIVOX_RETENTION_DAYS=str(2 / 86400), OMNIVOX_CLEANUP_INTERVAL_S="0.3")
    with cluster(workers=1, engine="echo", **env) as c:
        async with StreamingClient(c.ws, "long") as cl:
            messages: list[dict] = []
            for n in range(10):  # over 3 s of turns, longer than the retention: cleanup runs meanwhile
                messages.append({"role": "user", "content": f"turn {n}"})
                reply = await cl.turn(messages)
                messages.append({"role": "assistant", "content": reply["text"]})
                await asyncio.sleep(0.3)
                assert (data / "sessions" / "long" / "meta.json").is_file()
        detail = finished(c.url, "long", {}, timeout=5)  # finished whole...
        assert len([t for t in detail["timeline"]["turns"] if t["role"] == "user"]) == 10
        for _ in range(100):  # ...then removed once two seconds old
            if not (data / "sessions" / "long").exists():
                break
            await asyncio.sleep(0.1)
        assert not (data / "sessions" / "long").exists()
        assert 'omnivox_recordings_removed_total{reason="age"} 1.0' in httpx.get(c.url + "/metrics").text


# ---- the API: traversal, deletes under a reader, keys


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    env = recording_env(data, OMNIVOX_ADMIN_KEY="adminkey")
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("logs"), **env) as c:
        c.data_dir = data
        yield c


ADMIN = {"Authorization": "Bearer adminkey"}


async def spoken_session(c, session_id: str) -> dict:
    from omnivox.audio.pcm import pcm16_to_b64

    part = {"type": "audio", "data": pcm16_to_b64(speech(STORY)), "format": "pcm16", "sample_rate": 24000}
    async with StreamingClient(c.ws, session_id, timeout=30) as cl:
        await cl.turn([{"role": "user", "content": [part]}], generate_audio=True)
    return finished(c.url, session_id, ADMIN)


async def test_no_id_or_file_path_reaches_outside_a_recording(guarded):
    c = guarded
    await spoken_session(c, "inside")
    secret = c.data_dir / "secret.txt"
    secret.write_text("top secret")
    (c.data_dir / "sessions" / "inside" / "user_audio" / "link.wav").symlink_to(secret)
    base = "/api/recordings"
    bad = [
        f"{base}/..",
        f"{base}/%2e%2e",
        f"{base}/..%2F..%2Fsecret.txt",
        f"{base}/%2E%2E/files/secret.txt",
        f"{base}/inside/files/../meta.json",
        f"{base}/inside/files/..%2F..%2Fsecret.txt",
        f"{base}/inside/files/user_audio/..%2F..%2F..%2Fsecret.txt",
        f"{base}/inside/files/%2F{str(secret).lstrip('/')}",
        f"{base}/inside/files/{secret}",
        f"{base}/inside/files/user_audio%5C..%5C..%5Csecret.txt",
        f"{base}/inside/files/user_audio/link.wav",  # a symlink planted inside
        f"{base}/inside/files/.lock",
        f"{base}/inside/files/meta.json",
        f"{base}/inside/files/user_audio",
        f"{base}/inside/replay.wav/..%2F..%2F..%2Fsecret.txt",
    ]
    for path in bad:
        for headers in (ADMIN, {}):
            status, body = raw_get(c.url, path, headers=headers)
            assert status in (400, 401, 404, 422), (path, status)
            assert b"top secret" not in body, path
    status, _ = raw_get(c.url, f"{base}/..%2F..", method="DELETE", headers=ADMIN)
    assert status in (401, 404, 405)
    assert httpx.delete(c.url + f"{base}/%2e%2e", headers=ADMIN).status_code == 404
    assert secret.read_text() == "top secret"
    # the well-formed requests work
    assert httpx.get(c.url + f"{base}/inside/files/user_audio/000001.wav", headers=ADMIN).status_code == 200


async def test_a_recording_deleted_while_replayed_finishes_playing_then_is_gone(guarded):
    c = guarded
    detail = await spoken_session(c, "deleted-midway")
    url = c.url + detail["media"]["wav"]
    with httpx.stream("GET", url, headers={"Range": "bytes=1000-"}) as resp:
        assert resp.status_code == 206
        expected = int(resp.headers["content-length"])
        size = int(resp.headers["content-range"].split("/")[1])
        chunks = resp.iter_bytes(4096)
        got = len(next(chunks))
        # an admin deletes it while the player is still reading
        assert httpx.delete(c.url + "/api/recordings/deleted-midway", headers=ADMIN).json()["deleted"]
        assert not (c.data_dir / "sessions" / "deleted-midway").exists()
        got += sum(len(chunk) for chunk in chunks)
    assert got == expected == size - 1000
    assert httpx.get(url, headers={"Range": "bytes=0-99"}).status_code == 404  # the next seek finds nothing
    listing = httpx.get(c.url + "/api/recordings", headers=ADMIN).json()["recordings"]
    assert "deleted-midway" not in [r["session_id"] for r in listing]


async def test_recordings_need_the_admin_key_and_media_links_open_one_recording(guarded):
    c = guarded
    one = await spoken_session(c, "keyed-one")
    two = await spoken_session(c, "keyed-two")
    assert httpx.get(c.url + "/api/recordings").status_code == 401
    assert httpx.get(c.url + "/api/recordings/keyed-one").status_code == 401
    assert httpx.delete(c.url + "/api/recordings/keyed-one").status_code == 401
    assert httpx.get(c.url + "/api/recordings/keyed-one/replay.wav").status_code == 401
    token_one = one["media"]["token"]
    ok = httpx.get(c.url + one["media"]["wav"], headers={"Range": "bytes=0-43"})
    assert ok.status_code == 206 and ok.content[:4] == b"RIFF" and len(ok.content) == 44
    assert ok.headers["content-range"].startswith("bytes 0-43/")
    # one recording's token opens nothing else, a tampered or expired one nothing at all
    other = c.url + f"/api/recordings/keyed-two/replay.wav?token={token_one}"
    assert httpx.get(other).status_code == 401
    expires, sig = token_one.split(".")
    for token in (f"{expires}.{'0' * len(sig)}", f"{int(expires) + 10}.{sig}", f"1.{sig}", "junk"):
        assert httpx.get(c.url + f"/api/recordings/keyed-one/replay.wav?token={token}").status_code == 401
    assert httpx.get(c.url + two["media"]["wav"]).status_code == 200
    files = httpx.get(c.url + f"/api/recordings/keyed-one/files/recording.json?token={token_one}")
    assert files.status_code == 200 and files.json()["recording_id"] == "keyed-one"
    # pages: newest first, a page at a time
    page = httpx.get(c.url + "/api/recordings?limit=1", headers=ADMIN).json()
    assert [r["session_id"] for r in page["recordings"]] == ["keyed-two"] and page["next_cursor"]
    nxt = httpx.get(c.url + f"/api/recordings?limit=1&cursor={page['next_cursor']}", headers=ADMIN).json()
    assert [r["session_id"] for r in nxt["recordings"]] == ["keyed-one"]
    assert httpx.get(c.url + "/api/recordings?cursor=nonsense", headers=ADMIN).status_code == 400
    found = httpx.get(c.url + "/api/recordings?q=YOU%20said&kind=streaming", headers=ADMIN).json()
    assert {r["session_id"] for r in found["recordings"]} >= {"keyed-one", "keyed-two"}
    assert httpx.get(c.url + "/api/recordings?q=zebra", headers=ADMIN).json()["recordings"] == []
    # a delete from another site's page is refused; from the gateway's own page it goes through
    cross = httpx.delete(
        c.url + "/api/recordings/keyed-one", headers={**ADMIN, "Origin": "http://evil.example"}
    )
    assert cross.status_code == 403
    assert httpx.delete(c.url + "/api/recordings/keyed-one", headers=ADMIN).status_code == 200
    assert httpx.get(c.url + "/api/recordings/keyed-one", headers=ADMIN).status_code == 404
    assert (c.data_dir / "sessions" / "keyed-two").is_dir()


async def test_a_malformed_media_token_is_refused_without_a_fault(guarded):
    """Issue 25, finding 6: non-ASCII tokens and 5,000-digit expiries were an unauthenticated 500."""
    c = guarded
    await spoken_session(c, "token-shapes")
    for token in ("%C3%A9.abc", "9" * 5000 + ".abc", "4102444800." + "%C3%BC" * 64, "%D9%A3%D9%A3.x", "."):
        for path in ("replay.wav", "replay.mp4", "files/recording.json"):
            status, body = raw_get(c.url, f"/api/recordings/token-shapes/{path}?token={token}")
            assert status == 401, (token[:20], path, status, body[:200])
    assert "Traceback" not in (c.log_dir / "gateway.log").read_text()
