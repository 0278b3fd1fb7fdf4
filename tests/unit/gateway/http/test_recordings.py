"""Serving recordings: files opened before the answer starts (a delete meanwhile cuts nothing off),
range requests, and media tokens bound to one recording and a time."""

from __future__ import annotations

import os

import pytest

from omnivox.gateway.http.recordings import MediaTokens, OpenedFileResponse


async def serve(response, headers=(), on_body=None, on_start=None):
    """Run an ASGI response by hand; returns (status, headers, body)."""
    scope = {
        "type": "http",
        "method": "GET",
        "headers": [(k.encode(), v.encode()) for k, v in headers],
        "asgi": {"spec_version": "2.4"},
    }
    sent = {"status": None, "headers": {}, "body": b""}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            sent["status"] = message["status"]
            sent["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}
            if on_start is not None:
                on_start()
        else:
            sent["body"] += message.get("body", b"")
            if on_body is not None:
                on_body()

    await response(scope, receive, send)
    return sent["status"], sent["headers"], sent["body"]


def opened(path):
    return OpenedFileResponse(path.open("rb"), str(path), "audio/wav")  # the response closes it


@pytest.fixture
def big(tmp_path):
    path = tmp_path / "merged_replay.wav"
    path.write_bytes(bytes(range(256)) * 2000)  # 512 kB: several 64 kB reads
    return path


@pytest.mark.parametrize("when", ["on_start", "on_body"])
async def test_a_file_deleted_while_it_is_sent_is_still_sent_whole(big, when):
    """(A plain FileResponse opens the file after the headers have gone: deleted in between, the
    answer breaks off.)"""
    data = big.read_bytes()
    response = opened(big)
    status, headers, body = await serve(response, **{when: lambda: big.unlink(missing_ok=True)})
    assert not big.exists() and status == 200 and body == data
    assert headers["content-length"] == str(len(data)) and headers["accept-ranges"] == "bytes"
    assert response._fileobj.closed


async def test_range_requests_let_a_player_seek(big):
    data = big.read_bytes()
    status, headers, body = await serve(opened(big), [("range", "bytes=1000-1999")])
    assert status == 206 and body == data[1000:2000]
    assert headers["content-range"] == f"bytes 1000-1999/{len(data)}"
    status, headers, _ = await serve(opened(big), [("range", f"bytes={len(data) + 5}-")])
    assert status == 416


async def test_the_file_is_closed_even_when_the_client_goes(big):
    response = opened(big)

    def gone() -> None:
        raise OSError("client went away")

    with pytest.raises(OSError):
        await serve(response, on_body=gone)
    assert response._fileobj.closed
    os.stat(big)  # (nothing else happened to it)


def test_media_tokens_open_one_recording_for_a_while():
    tokens = MediaTokens(ttl_s=60)
    token = tokens.make("rec-1", now=1000.0)
    assert tokens.check("rec-1", token, now=1059.0)
    assert not tokens.check("rec-1", token, now=1061.0)  # expired
    assert not tokens.check("rec-2", token, now=1000.0)  # another recording
    expires, sig = token.split(".")
    assert not tokens.check("rec-1", f"{int(expires) + 100}.{sig}", now=1000.0)  # a longer life, forged
    assert not tokens.check("rec-1", "garbage", now=1000.0) and not tokens.check("rec-1", "", now=1000.0)
    assert not MediaTokens().check("rec-1", token, now=1000.0)  # another gateway's secret


@pytest.mark.parametrize(
    "token",
    [
        "é.abc",
        "٣٣٣٣٣٣٣٣٣٣.abc",  # digits, but not ASCII ones
        "9" * 5000 + ".abc",  # past int()'s digit limit
        "99999999999.é" + "a" * 63,  # a signature int cannot be compared in constant time
        "4102444800." + "ü" * 64,
        "",
        ".",
        "4102444800",
        "4102444800.",
        "-1.abc",
    ],
    ids=[
        "non-ascii",
        "arabic-digits",
        "5000-digits",
        "non-ascii-sig",
        "umlaut-sig",
        "empty",
        "dot",
        "no-sig",
        "empty-sig",
        "negative",
    ],
)
def test_a_malformed_token_opens_nothing_and_raises_nothing(token):
    assert MediaTokens().check("rec-1", token, now=1000.0) is False
