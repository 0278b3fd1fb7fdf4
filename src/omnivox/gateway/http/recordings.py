"""Recordings over HTTP (admin): list, one recording's meta and timeline, its replays and chunks
(with HTTP range requests, so players can seek), and delete.

Media links: a browser's ``<audio>``/``<video>`` cannot send an ``Authorization`` header, so the
detail answer carries links with a short-lived token (``?token=``, an HMAC of the recording id and
an expiry under a secret this gateway makes at startup, or that gateways sharing a store share;
never a key). A token opens that one
recording's files for an hour, nothing else; the admin key opens them too.

A file being sent is opened before the answer starts: deleting a recording while it is replayed
never breaks the transfer under way (later requests get 404).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from typing import IO, Any

import anyio
from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response
from fastapi.responses import FileResponse
from starlette.types import Receive, Scope, Send

from omnivox.core.errors import NotFound, OmnivoxError, RecordingBusy
from omnivox.gateway.auth import allowed, offered_key, require, require_same_origin
from omnivox.recording.store import (
    META,
    REPLAY_MP4,
    REPLAY_WAV,
    RecordingStore,
    check_file,
    check_recording_id,
    decode_cursor,
    dir_bytes,
    encode_cursor,
)
from omnivox.recording.turns import build_turns, heard_ends

router = APIRouter(prefix="/api/recordings", tags=["recordings"])
ADMIN = [Depends(require("admin"))]
MEDIA_TYPES = {
    "wav": "audio/wav",
    "mp4": "video/mp4",
    "jpg": "image/jpeg",
    "png": "image/png",
    "json": "application/json",
}


# what ``make`` gives: an expiry in seconds (ASCII digits, far below int()'s digit limit) and a hex HMAC
_TOKEN = re.compile(r"(?P<expires>[0-9]{1,12})\.(?P<sig>[0-9a-f]{64})", re.ASCII)


class MediaTokens:
    """Short-lived links to one recording's files. The secret is random per process unless given
    (``media_secret``, or the one gateways on a shared store keep there): then a link made by one
    gateway opens on any."""

    def __init__(self, ttl_s: float = 3600.0, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)
        self.ttl_s = ttl_s

    def use_secret(self, secret: bytes) -> None:
        self._secret = secret

    def make(self, recording_id: str, now: float | None = None) -> str:
        expires = int((time.time() if now is None else now) + self.ttl_s)
        return f"{expires}.{self._sign(recording_id, expires)}"

    def check(self, recording_id: str, token: str, now: float | None = None) -> bool:
        """Whether ``token`` opens ``recording_id`` now. Anyone may send one: whatever its shape, the
        answer is a bool (never an exception)."""
        match = _TOKEN.fullmatch(token)
        if match is None:
            return False
        expires = int(match["expires"])
        if expires < (time.time() if now is None else now):
            return False
        return hmac.compare_digest(match["sig"].encode(), self._sign(recording_id, expires).encode())

    def _sign(self, recording_id: str, expires: int) -> str:
        return hmac.new(self._secret, f"{recording_id}\n{expires}".encode(), hashlib.sha256).hexdigest()


@contextlib.contextmanager
def _as_http() -> Iterator[None]:
    try:
        yield
    except OmnivoxError as exc:
        raise HTTPException(exc.http_status, detail={"code": exc.code, "message": exc.message}) from None


def _store(request: Request) -> RecordingStore:
    return RecordingStore.under(request.app.state.ctx.settings.data_dir)


def _tokens(request: Request) -> MediaTokens:
    return request.app.state.media_tokens


def _live(request: Request) -> set[str]:
    service = request.app.state.ctx.recordings
    return service.live() if service is not None else set()


def media_access(request: Request, session_id: str, token: str | None = Query(None)) -> None:
    """The admin key, or a media token for this recording."""
    settings = request.app.state.ctx.settings
    if allowed(settings, "admin", offered_key(request.headers)):
        return
    if token is not None and _tokens(request).check(session_id, token):
        return
    raise HTTPException(
        401, detail={"code": "unauthorized", "message": "this needs the admin key or a media link's token"}
    )


# ---- listing


def _summary(store: RecordingStore, entry: Any, live: set[str], now: float) -> dict[str, Any]:
    meta = entry.meta
    recording = meta.get("status") != "complete"
    return {
        "session_id": entry.recording_id,
        "client_session_id": meta.get("session_id"),
        "kind": meta.get("kind"),
        "task_type": meta.get("task_type"),
        "status": "recording" if recording else "complete",
        "live": entry.recording_id in live or (recording and store.is_live(entry.path)),
        "started_at": entry.started_at,
        "duration_s": round(now - entry.started_at, 3) if recording else meta.get("duration_s"),
        "turns": meta.get("turns", 0),
        "bytes": dir_bytes(entry.path) if recording else meta.get("bytes", 0),
        "outcome": (meta.get("outcome") or {}).get("reason"),
        "barge_ins": meta.get("barge_ins", 0),
        "replay": meta.get("replay", {"wav": False, "mp4": False}),
    }


def _list(
    store: RecordingStore, live: set[str], kind: str | None, q: str | None, limit: int, cursor: str | None
) -> dict[str, Any]:
    entries = store.entries()
    if kind:
        entries = [e for e in entries if kind in (e.meta.get("kind"), e.meta.get("task_type"))]
    if q:
        needle = q.casefold()
        entries = [e for e in entries if needle in str(e.meta.get("search_text", "")).casefold()]
    entries.sort(key=lambda e: (e.started_at, e.recording_id), reverse=True)
    if cursor is not None:
        after = decode_cursor(cursor)
        entries = [e for e in entries if (e.started_at, e.recording_id) < after]
    page = entries[:limit]
    now = time.time()
    more = len(entries) > limit
    return {
        "recordings": [_summary(store, e, live, now) for e in page],
        "next_cursor": encode_cursor(page[-1].started_at, page[-1].recording_id) if more and page else None,
    }


@router.get("", dependencies=ADMIN)
async def list_recordings(
    request: Request,
    limit: int = Query(50, ge=1, le=500),
    cursor: str | None = Query(None, max_length=400),
    kind: str | None = Query(None, max_length=40),
    q: str | None = Query(None, max_length=200, description="text the transcripts contain"),
) -> dict[str, Any]:
    """Recordings, newest first: ``{recordings: [...], next_cursor}`` (pass it back as ``cursor``).

    ``listed_by`` says whose: each gateway lists the recordings under its own ``data_dir`` (gateways
    sharing a store share recordings only when their ``data_dir`` is shared storage)."""
    ctx = request.app.state.ctx
    with _as_http():
        listed = await asyncio.to_thread(_list, _store(request), _live(request), kind, q, limit, cursor)
    listed["listed_by"] = {"gateway_id": ctx.store.gateway_id, "store": ctx.store.kind}
    return listed


# ---- one recording


def _detail(store: RecordingStore, recording_id: str, live: set[str]) -> dict[str, Any]:
    meta = store.meta(recording_id)
    meta.pop("search_text", None)
    timeline = store.timeline(recording_id)
    if timeline is None:  # still being made: what was journaled so far
        events = store.journal(recording_id)
        heard_ends(events)
        timeline = {
            "events": events,
            "turns": build_turns(events),
            "duration_s": round(max([e.get("end", e.get("t", 0.0)) for e in events] + [0.0]), 3),
        }
    store.touch_used(recording_id)
    directory = store.dir_of(recording_id)
    return {
        "meta": meta,
        "timeline": timeline,
        "live": recording_id in live or store.is_live(directory),
        "media": {
            "wav": (directory / REPLAY_WAV).is_file(),
            "mp4": (directory / REPLAY_MP4).is_file(),
        },
    }


@router.get("/{session_id}", dependencies=ADMIN)
async def get_recording(session_id: str, request: Request) -> dict[str, Any]:
    """Meta, timeline (turns and events) and links to the replays (with a media token)."""
    with _as_http():
        detail = await asyncio.to_thread(_detail, _store(request), session_id, _live(request))
    token = _tokens(request).make(session_id)
    base = f"/api/recordings/{session_id}"
    media = detail["media"]
    detail["media"] = {
        "token": token,
        "files": f"{base}/files/",
        "wav": f"{base}/replay.wav?token={token}" if media["wav"] else None,
        "mp4": f"{base}/replay.mp4?token={token}" if media["mp4"] else None,
    }
    return detail


@router.delete("/{session_id}", dependencies=[Depends(require_same_origin), *ADMIN])
async def delete_recording(session_id: str, request: Request) -> dict[str, Any]:
    """Remove a recording (409 while its session is still recording)."""
    with _as_http():
        if session_id in _live(request):
            raise RecordingBusy(f"recording {session_id!r} is being made; end its session first")
        await asyncio.to_thread(_store(request).delete, session_id)
    return {"session_id": session_id, "deleted": True}


# ---- files


class OpenedFileResponse(FileResponse):
    """A FileResponse (with its range requests) of a file opened before the answer starts: removing
    the file meanwhile does not cut the transfer off."""

    def __init__(self, fileobj: IO[bytes], path: str, media_type: str) -> None:
        super().__init__(path, media_type=media_type, stat_result=os.fstat(fileobj.fileno()))
        self._fileobj = fileobj
        self.headers["cache-control"] = "private, no-cache"

    @contextlib.asynccontextmanager
    async def _open_file(self) -> AsyncIterator[anyio.AsyncFile[bytes]]:
        yield anyio.AsyncFile(self._fileobj)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        extensions = {k: v for k, v in scope.get("extensions", {}).items() if k != "http.response.pathsend"}
        try:
            await super().__call__({**scope, "extensions": extensions}, receive, send)
        finally:
            self._fileobj.close()


def _open(store: RecordingStore, recording_id: str, path: str) -> tuple[IO[bytes], str]:
    target = store.file_of(recording_id, path)
    try:
        fileobj = open(target, "rb")
    except FileNotFoundError:
        raise NotFound(f"no file {path!r} in recording {recording_id!r}") from None
    store.touch_used(recording_id)
    return fileobj, str(target)


async def _file(request: Request, session_id: str, path: str) -> Response:
    with _as_http():
        check_recording_id(session_id)
        check_file(path)
        if path == META:
            raise NotFound("meta.json is part of GET /api/recordings/{session_id}")
        fileobj, where = await asyncio.to_thread(_open, _store(request), session_id, path)
    return OpenedFileResponse(
        fileobj, where, MEDIA_TYPES.get(path.rsplit(".", 1)[-1], "application/octet-stream")
    )


@router.get("/{session_id}/replay.wav", dependencies=[Depends(media_access)])
async def replay_wav(session_id: str, request: Request) -> Response:
    """The merged replay: stereo (user left, assistant right), second 0 = the session's start."""
    return await _file(request, session_id, REPLAY_WAV)


@router.get("/{session_id}/replay.mp4", dependencies=[Depends(media_access)])
async def replay_mp4(session_id: str, request: Request) -> Response:
    """Omni sessions: the camera frames with the merged replay's audio."""
    return await _file(request, session_id, REPLAY_MP4)


@router.get("/{session_id}/files/{path:path}", dependencies=[Depends(media_access)])
async def recording_file(session_id: str, path: str, request: Request) -> Response:
    """One file of the recording: ``user_audio/000001.wav``, ``user_frames/000003.jpg``,
    ``recording.json``..."""
    return await _file(request, session_id, path)
