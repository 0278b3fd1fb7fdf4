"""Fuzzing the gateway's HTTP surfaces: WebRTC offers (``POST /v1/realtime/calls``), ephemeral keys
(``POST /v1/realtime/client_secrets``), the recordings API and reference-audio uploads.

Each surface draws seeded requests: valid ones, valid ones with fields mutated, bodies that are
not what they say (random bytes, text that is not UTF-8, JSON nested too deep, scalars), bodies past
the limits, odd ids, paths, queries, ranges and tokens, and (on a keyed server) requests with no
key, a wrong key or an ephemeral key where the client key is needed. The outcome of each is its
HTTP status and error code; a 500 is a server fault. A call that was answered is hung up at once,
and after every ``--check-every`` requests the server must still serve (see ``fuzz.check_serving``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from omnivox.audio.wav import write_wav
from omnivox.bench.fuzz_frames import ODD_VALUES, mutate, nested_json
from omnivox.bench.fuzz_outcomes import Outcomes
from omnivox.bench.fuzz_target import FuzzStats, Target, check_serving

SURFACES = ("webrtc_offers", "client_secrets", "recordings", "uploads")


@dataclass
class Req:
    """One request as the fuzzer sends it."""

    method: str
    path: str
    body: bytes | None = None
    content_type: str | None = None
    auth: str = "client"  # client, admin, none, wrong, ephemeral
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Context:
    """What the requests draw on: a real SDP offer, recordings the server has, a spent key."""

    offer: str
    recordings: list[str]
    tokens: dict[str, str]  # recording -> a media token for it
    ephemeral: str | None = None


def _odd_text(rng: random.Random) -> str:
    return rng.choice(
        [
            "",
            "..",
            "%2e%2e",
            "../../etc/passwd",
            "a" * rng.randint(100, 5000),
            "\u00e9\u4e2d\U0001f600",
            "x%00y",
            "rec-" + str(rng.randint(0, 9)),
            "fuzz-1",
            "9" * 400,
            "a/b",
            "%2F",
            " ",
        ]
    )


def _session(rng: random.Random) -> dict[str, Any]:
    session = {"type": "realtime", "instructions": "be brief", "audio": {"output": {"voice": "heart"}}}
    return mutate(session, rng) if rng.random() < 0.6 else session


def _auth(rng: random.Random, keyed: bool, usual: str) -> str:
    if keyed and rng.random() < 0.12:
        return rng.choice(["none", "wrong", "ephemeral"])
    return usual


def _bytes_kind(rng: random.Random) -> tuple[str, bytes]:
    roll = rng.random()
    if roll < 0.3:
        return "garbage", rng.randbytes(rng.randint(0, 3000))
    if roll < 0.5:
        return "non_utf8", b"v=0\r\n\xff\xfe\xfa" + rng.randbytes(50)
    if roll < 0.7:
        return "nested", nested_json(rng.choice([100, 3000])).encode()
    if roll < 0.85:
        return "scalar", rng.choice([b"[]", b"null", b"42", b'"x"', b"{}", b"\x00"])
    return "oversized", b"x" * rng.randint(1_100_000, 1_600_000)


def _sdp_mutation(offer: str, rng: random.Random) -> str:
    lines = offer.split("\r\n")
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        action = rng.random()
        if action < 0.3:
            lines.pop(i)
        elif action < 0.5:
            lines.insert(i, lines[i])
        elif action < 0.8:
            head = lines[i].split("=", 1)[0] if "=" in lines[i] else "a"
            lines[i] = f"{head}={rng.choice(ODD_VALUES)(rng)}"
        else:
            lines[i] = "a=" + "z" * rng.randint(1000, 60_000)
    return "\r\n".join(lines)


def webrtc_requests(ctx: Context, keyed: bool, seed: int) -> Iterator[tuple[str, Req]]:
    rng = random.Random(f"webrtc-{seed}")
    path = "/v1/realtime/calls"
    while True:
        roll = rng.random()
        auth = _auth(rng, keyed, "client")
        if roll < 0.08:
            yield "valid", Req("POST", path, ctx.offer.encode(), "application/sdp", auth)
        elif roll < 0.4:
            body = _sdp_mutation(ctx.offer, rng).encode("utf-8", "surrogatepass")
            yield "mutated", Req("POST", path, body, "application/sdp", auth)
        elif roll < 0.6:
            parts: dict[str, str] = {
                "sdp": ctx.offer if rng.random() < 0.5 else _sdp_mutation(ctx.offer, rng)
            }
            if rng.random() < 0.8:
                session = _session(rng)
                parts["session"] = rng.choice(
                    [json.dumps(session), "not json", "[1]", "null", nested_json(2000)]
                )
            if rng.random() < 0.15:
                parts.pop("sdp")
            body, ctype = _multipart(parts, rng)
            yield "multipart", Req("POST", path, body, ctype, auth)
        elif roll < 0.75:
            kind, body = _bytes_kind(rng)
            yield kind, Req("POST", path, body, "application/sdp", auth)
        elif roll < 0.85:
            ctype = rng.choice(
                [
                    "text/plain",
                    "application/json",
                    "multipart/form-data",
                    "",
                    "multipart/form-data; boundary=",
                ]
            )
            yield "content_type", Req("POST", path, ctx.offer.encode(), ctype, auth)
        else:
            call = rng.choice(["rtc_0123456789abcdef", _odd_text(rng), "rtc_" + "f" * 16])
            yield "hangup", Req("POST", f"{path}/{call}/hangup", None, None, auth)


def _multipart(parts: dict[str, str], rng: random.Random) -> tuple[bytes, str]:
    boundary = "fuzz" + str(rng.randint(0, 10**9))
    chunks = []
    for name, value in parts.items():
        chunks.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
            + value.encode("utf-8", "surrogatepass")
            + b"\r\n"
        )
    if rng.random() < 0.85:
        chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


def secrets_requests(keyed: bool, seed: int) -> Iterator[tuple[str, Req]]:
    rng = random.Random(f"secrets-{seed}")
    path = "/v1/realtime/client_secrets"
    valid = {"expires_after": {"anchor": "created_at", "seconds": 60}, "session": {"type": "realtime"}}
    while True:
        roll = rng.random()
        auth = _auth(rng, keyed, "client")
        if roll < 0.2:
            yield "valid", Req("POST", path, json.dumps(valid).encode(), "application/json", auth)
        elif roll < 0.6:
            body = {**valid, "session": _session(rng)}
            yield (
                "mutated",
                Req("POST", path, json.dumps(mutate(body, rng)).encode(), "application/json", auth),
            )
        elif roll < 0.7:
            yield "empty", Req("POST", path, b"", "application/json", auth)
        else:
            kind, data = _bytes_kind(rng)
            yield kind, Req("POST", path, data, "application/json", auth)


def recordings_requests(ctx: Context, keyed: bool, seed: int) -> Iterator[tuple[str, Req]]:
    rng = random.Random(f"recordings-{seed}")
    base = "/api/recordings"

    def some_id() -> str:
        if ctx.recordings and rng.random() < 0.6:
            return rng.choice(ctx.recordings)
        return _odd_text(rng)

    while True:
        roll = rng.random()
        auth = _auth(rng, keyed, "admin")
        if roll < 0.25:
            query = {
                "limit": rng.choice(["1", "0", "-1", "501", "abc", "9" * 30, "50"]),
                "cursor": rng.choice(
                    ["", "x", base64.urlsafe_b64encode(rng.randbytes(30)).decode(), "a" * 500]
                ),
                "kind": rng.choice(["realtime", "streaming", "", "\u00e9", "k" * 50]),
                "q": rng.choice(["hello", "", "%", "\u4e2d" * 300]),
            }
            query = {k: v for k, v in query.items() if rng.random() < 0.6}
            yield "list", Req("GET", base + "?" + "&".join(f"{k}={v}" for k, v in query.items()), auth=auth)
        elif roll < 0.45:
            yield "detail", Req("GET", f"{base}/{some_id()}", auth=auth)
        elif roll < 0.7:
            rid = some_id()
            what = rng.choice(
                [
                    "replay.wav",
                    "replay.mp4",
                    "files/recording.json",
                    "files/user_audio/000001.wav",
                    "files/" + _odd_text(rng),
                    "files/../meta.json",
                    "files/.lock",
                ]
            )
            headers = (
                {
                    "Range": rng.choice(
                        [
                            "bytes=0-99",
                            "bytes=abc",
                            "bytes=-",
                            "bytes=99999999-",
                            "bytes=0-1,5-9",
                            "bytes=-10",
                        ]
                    )
                }
                if rng.random() < 0.5
                else {}
            )
            token = (
                ctx.tokens.get(rid)
                if rng.random() < 0.5
                else rng.choice(
                    ["junk", "1.abc", "9" * 5000 + ".x", "4102444800." + "0" * 64, "%C3%A9.%C3%A9"]
                )
            )
            path = f"{base}/{rid}/{what}" + (
                f"?token={token}" if token is not None and rng.random() < 0.7 else ""
            )
            yield "media", Req("GET", path, auth=rng.choice([auth, "none"]), headers=headers)
        elif roll < 0.8:
            yield "delete", Req("DELETE", f"{base}/{_odd_text(rng)}", auth=auth)
        else:
            _, data = _bytes_kind(rng)
            yield "body_to_get", Req("GET", f"{base}/{some_id()}", data, "application/json", auth)


def uploads_requests(keyed: bool, seed: int) -> Iterator[tuple[str, Req]]:
    rng = random.Random(f"uploads-{seed}")
    base = "/api/assets/ref_audio"
    t = np.arange(int(1.5 * 16000)) / 16000
    wav = write_wav((0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 16000)
    while True:
        roll = rng.random()
        auth = _auth(rng, keyed, "client")
        if roll < 0.1:
            body, ctype = _file_form(wav, "clip.wav", rng)
            yield "valid", Req("POST", base, body, ctype, auth)
        elif roll < 0.45:
            header = bytearray(wav)
            for _ in range(rng.randint(1, 6)):
                header[rng.randrange(0, 64)] = rng.randrange(256)  # sizes, format, rate, channels
            filename = rng.choice(["a.wav", "", "../x.wav", "\u00e9" * 300])
            body, ctype = _file_form(bytes(header), filename, rng)
            yield "mutated_wav", Req("POST", base, body, ctype, auth)
        elif roll < 0.6:
            data = rng.choice([b"OggS" + rng.randbytes(500), rng.randbytes(rng.randint(0, 4000)), b"RIFF"])
            body, ctype = _file_form(data, "x.ogg", rng)
            yield "garbage_file", Req("POST", base, body, ctype, auth)
        elif roll < 0.7:
            kind, data = _bytes_kind(rng)
            yield (
                kind,
                Req("POST", base, data, rng.choice(["multipart/form-data; boundary=b", "audio/wav"]), auth),
            )
        elif roll < 0.85:
            yield (
                "get",
                Req("GET", f"{base}/{rng.choice(['ref_0123456789abcdef', _odd_text(rng)])}", auth=auth),
            )
        else:
            yield "delete", Req("DELETE", f"{base}/{_odd_text(rng)}", auth=_auth(rng, keyed, "admin"))


def _file_form(data: bytes, filename: str, rng: random.Random) -> tuple[bytes, str]:
    boundary = "up" + str(rng.randint(0, 10**9))
    name = rng.choice(["voice", "", "n" * 500, "\ud800"]) if rng.random() < 0.5 else None
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: audio/wav\r\n\r\n"
    ).encode("utf-8", "surrogatepass")
    body = head + data + b"\r\n"
    if name is not None:
        body += f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n'.encode()
        body += name.encode("utf-8", "surrogatepass") + b"\r\n"
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


# ---- sending


def _headers(target: Target, ctx: Context, req: Req) -> dict[str, str]:
    keys = {
        "client": target.client_key,
        "admin": target.admin_key,
        "none": None,
        "wrong": "not-the-key",
        "ephemeral": ctx.ephemeral,
    }
    key = keys[req.auth]
    headers = dict(req.headers)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if req.content_type is not None:
        headers["Content-Type"] = req.content_type
    return headers


def outcome_of(resp: httpx.Response) -> str:
    code = None
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        body = resp.json()
        error = body.get("error") or body.get("detail")
        code = error.get("code") if isinstance(error, dict) else None
    return f"http:{resp.status_code}" + (f":{code}" if code else "")


async def real_offer() -> str:
    """An SDP offer as a WebRTC client makes it (aiortc: an audio track and the events channel)."""
    from aiortc import RTCPeerConnection

    pc = RTCPeerConnection()
    try:
        pc.addTransceiver("audio", direction="sendrecv")
        pc.createDataChannel("oai-events")
        await pc.setLocalDescription(await pc.createOffer())
        return pc.localDescription.sdp
    finally:
        await pc.close()


async def context_of(target: Target) -> Context:
    async with httpx.AsyncClient(base_url=target.http, timeout=10) as client:
        listed = (await client.get("/api/recordings?limit=20", headers=target.admin())).json()
        ids = [r["session_id"] for r in listed.get("recordings", [])]
        tokens = {}
        for rid in ids[:5]:
            detail = await client.get(f"/api/recordings/{rid}", headers=target.admin())
            if detail.status_code == 200:
                tokens[rid] = detail.json()["media"]["token"]
        ephemeral = None
        if target.client_key:
            minted = await client.post(
                "/v1/realtime/client_secrets",
                json={"expires_after": {"seconds": 600}},
                headers=target.client(),
            )
            ephemeral = minted.json().get("value")
    return Context(await real_offer(), ids, tokens, ephemeral)


async def fuzz_http(
    target: Target, surface: str, n: int, seed: int, every: int, outcomes: Outcomes
) -> FuzzStats:
    """``n`` requests of ``surface``; answered calls are hung up; a check every ``every``."""
    ctx = await context_of(target)
    keyed = target.client_key is not None
    source = {
        "webrtc_offers": lambda: webrtc_requests(ctx, keyed, seed),
        "client_secrets": lambda: secrets_requests(keyed, seed),
        "recordings": lambda: recordings_requests(ctx, keyed, seed),
        "uploads": lambda: uploads_requests(keyed, seed),
    }[surface]()
    stats = FuzzStats()
    began = time.monotonic()
    async with httpx.AsyncClient(base_url=target.http, timeout=30) as client:
        while stats.frames < n:
            kind, req = next(source)
            try:
                resp = await client.request(
                    req.method, req.path, content=req.body, headers=_headers(target, ctx, req)
                )
                outcome = outcome_of(resp)
                if resp.status_code == 201 and surface == "webrtc_offers":
                    await _hang_up(client, target, resp)
            except httpx.HTTPError as exc:
                outcome = f"http:failed:{type(exc).__name__}"
            stats.frames += 1
            stats.errors += not outcome.startswith("http:2")
            outcomes.add(surface, stats.frames, kind, outcome)
            if stats.frames % every == 0 or stats.frames == n:
                await check_serving(target, "realtime", stats)
    stats.seconds = time.monotonic() - began
    return stats


async def _hang_up(client: httpx.AsyncClient, target: Target, answer: httpx.Response) -> None:
    location = answer.headers.get("location", "")
    if location:
        await client.post(location + "/hangup", headers=target.client())
        await asyncio.sleep(0)  # (the call ends on the gateway's loop)
