"""Every HTTP body is bounded while it is read (issue 25, finding 2 and the streaming limit): a body
declared too large is refused before a byte of it is read, and one that streams on without a length
is refused as soon as it passes the route's limit, with the gateway's memory untouched."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cluster import cluster, free_port

KEY = "body-limits-key"
LIMIT = 256 * 1024  # http_body_max_bytes here

# (path, content type) of every route that reads a body
ROUTES = [
    ("/v1/realtime/calls", "application/sdp"),
    ("/v1/realtime/calls", "multipart/form-data; boundary=xyz"),
    ("/v1/realtime/client_secrets", "application/json"),
    ("/v1/realtime/calls/rtc_0123456789abcdef/accept", "application/json"),
    ("/api/assets/ref_audio", "multipart/form-data; boundary=xyz"),
    ("/telephony/twilio/voice", "application/x-www-form-urlencoded"),
    ("/api/workers/register", "application/json"),
    ("/api/pipeline", "application/json"),
    ("/api/recordings/some-session", "application/json"),  # a DELETE: no body expected at all
]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    env = {
        "OMNIVOX_API_KEY": KEY,
        "OMNIVOX_HTTP_BODY_MAX_BYTES": str(LIMIT),
        "OMNIVOX_REF_AUDIO_MAX_BYTES": str(LIMIT),
        "OMNIVOX_SIP_PORT": str(free_port()),
        "OMNIVOX_DATA_DIR": str(tmp_path_factory.mktemp("data")),
    }
    with cluster(workers=0, log_dir=tmp_path_factory.mktemp("bodies"), **env) as c:
        yield c


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def _answer(reader: asyncio.StreamReader) -> tuple[int, dict]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    lines = head.lower().split(b"\r\n")
    length = next((int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length")), 0)
    body = await reader.readexactly(length) if length else b""
    return status, json.loads(body) if body.startswith(b"{") else {}


def _head(method: str, path: str, content_type: str, extra: str) -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: {content_type}\r\n{extra}\r\n"
    ).encode()


def _method(path: str) -> str:
    return "DELETE" if path.startswith("/api/recordings/") else "POST"


async def declared_too_large(port: int, path: str, content_type: str) -> tuple[int, dict]:
    """Declare 400 MB, send 1 KiB of it, and wait for the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_head(_method(path), path, content_type, f"Content-Length: {400 * 2**20}\r\n"))
        writer.write(b"v=0\r\n" + b"a" * 1024)
        await writer.drain()
        return await asyncio.wait_for(_answer(reader), 10)
    finally:
        writer.close()


async def streamed_past_the_limit(port: int, path: str, content_type: str) -> tuple[int, dict]:
    """A chunked body four times the limit that never ends (no last chunk): it must be answered
    all the same, as soon as it passed the limit."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_head(_method(path), path, content_type, "Transfer-Encoding: chunked\r\n"))
        if content_type.startswith("multipart/"):  # a form whose file part never ends
            opening = b'--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'
            writer.write(f"{len(opening):x}\r\n".encode() + opening + b"\r\n")
        chunk = b"v" * 16384
        for _ in range(4 * LIMIT // len(chunk)):
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        await writer.drain()
        return await asyncio.wait_for(_answer(reader), 20)
    finally:
        writer.close()


def _code(body: dict) -> str | None:
    return (body.get("error") or body.get("detail") or {}).get("code")


def _refused(path: str, status: int, body: dict) -> bool:
    if path.startswith("/telephony/"):  # a carrier's webhook is answered in plain text
        return status == 413
    return (status, _code(body)) == (413, "message_too_large")


@pytest.mark.parametrize(("path", "content_type"), ROUTES, ids=[f"{p}-{t.split(';')[0]}" for p, t in ROUTES])
async def test_a_body_declared_too_large_is_refused_before_it_is_read(gateway, path, content_type):
    status, body = await declared_too_large(gateway.port, path, content_type)
    assert _refused(path, status, body), (status, body)


@pytest.mark.parametrize(("path", "content_type"), ROUTES, ids=[f"{p}-{t.split(';')[0]}" for p, t in ROUTES])
async def test_a_body_streamed_past_the_limit_is_refused_while_it_streams(gateway, path, content_type):
    before = rss_mib(gateway.gateway.pid)
    status, body = await streamed_past_the_limit(gateway.port, path, content_type)
    if path.startswith("/api/recordings/"):
        assert status == 404  # a route that reads no body answers without reading it
    else:
        assert _refused(path, status, body), (status, body)
    assert rss_mib(gateway.gateway.pid) - before < 40  # nothing like the body was kept


async def test_bodies_within_the_limit_are_still_read(gateway):
    """The bounds refuse only what is too large: a well-formed request goes through."""
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    body = json.dumps({"expires_after": {"anchor": "created_at", "seconds": 60}}).encode()
    writer.write(
        _head("POST", "/v1/realtime/client_secrets", "application/json", f"Content-Length: {len(body)}\r\n")
        + body
    )
    await writer.drain()
    status, answer = await asyncio.wait_for(_answer(reader), 10)
    writer.close()
    assert status == 200 and answer["value"].startswith("ek_")
