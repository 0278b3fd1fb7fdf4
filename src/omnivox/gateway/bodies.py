"""HTTP request bodies, bounded while they are read: nothing past a route's limit is ever buffered.

Two layers, so no route can forget:

- ``read_body(request, limit)``: what a route calls for its body. A ``Content-Length`` over the
  limit is refused before any byte is read; a body without one (chunked) is read chunk by chunk
  and refused as soon as it passes the limit. Either way ``MessageTooLarge`` (413), and the rest
  is never buffered (the server discards what still comes). The body it read is kept on
  the request, so ``request.form()`` / ``request.json()`` parse it afterwards without reading more.
- ``BodyLimit``: ASGI middleware with one ceiling for every HTTP request (the largest body any
  route takes), for what a route does not read itself: FastAPI reads a pydantic body (worker
  registration, pipeline reports) before any dependency checks a key.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping

from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from omnivox.core.config import Settings
from omnivox.core.errors import MessageTooLarge

__all__ = ["BodyLimit", "body_ceiling", "bounded_stream", "declared_length", "read_body"]

_FRAMING = 256 * 1024  # multipart boundaries, part headers and small fields around the largest part


def body_ceiling(settings: Settings) -> int:
    """The largest body any route takes: an upload, or a JSON/form body with an SDP offer beside it."""
    return max(settings.ref_audio_max_bytes, 2 * settings.http_body_max_bytes) + _FRAMING


def declared_length(headers: Mapping[str, str]) -> int | None:
    """The ``Content-Length`` a request declares (None: none, or not a plain number)."""
    value = headers.get("content-length", "").strip()
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        return None
    return int(value)


def _too_large(limit: int, declared: int | None = None) -> MessageTooLarge:
    if declared is not None:
        return MessageTooLarge(f"the body is {declared} bytes; the limit is {limit}")
    return MessageTooLarge(f"the body passed the limit of {limit} bytes")


async def bounded_stream(stream: AsyncIterator[bytes], limit: int) -> AsyncGenerator[bytes, None]:
    """Pass ``stream`` through; raise ``MessageTooLarge`` as soon as it has passed ``limit`` bytes."""
    seen = 0
    async for chunk in stream:
        seen += len(chunk)
        if seen > limit:
            raise _too_large(limit)
        yield chunk


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, at most ``limit`` bytes (else ``MessageTooLarge`` before reading more)."""
    declared = declared_length(request.headers)
    if declared is not None and declared > limit:
        raise _too_large(limit, declared)
    chunks = [chunk async for chunk in bounded_stream(request.stream(), limit)]
    body = b"".join(chunks)
    # starlette's own readers (form(), json()) take a body already read from here
    request._body = body
    return body


class _Passed(Exception):
    """Raised into the app by ``receive`` once the body passed the ceiling."""


class BodyLimit:
    """Every HTTP request's body bounded by ``ceiling`` bytes, counted as the app reads it.

    Once the body passes it, the app's read fails, and whatever the app answers then (FastAPI
    words a failed body read as a 400) is replaced by the 413."""

    def __init__(self, app: ASGIApp, ceiling: int) -> None:
        self.app = app
        self.ceiling = ceiling

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        declared = declared_length(headers)
        if declared is not None and declared > self.ceiling:
            await _refuse(scope, send, _too_large(self.ceiling, declared))
            return
        seen = 0
        passed = started = False

        async def counted() -> Message:
            nonlocal seen, passed
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.ceiling:
                    passed = True
                    raise _Passed
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            if passed:
                return  # the app's answer to a read that failed: the 413 goes instead
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except Exception:
            if not passed:
                raise
        if passed and not started:
            await _refuse(scope, send, _too_large(self.ceiling))


async def _refuse(scope: Scope, send: Send, err: MessageTooLarge) -> None:
    """413 in the shape the path's API answers errors (OpenAI's under /v1, else ``detail``)."""
    if str(scope.get("path", "")).startswith("/v1/"):
        error = {"type": "invalid_request_error", "code": err.code, "message": err.message, "param": None}
        body: dict[str, object] = {"error": error}
    else:
        body = {"detail": {"code": err.code, "message": err.message}}
    data = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
    ]
    await send({"type": "http.response.start", "status": err.http_status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
