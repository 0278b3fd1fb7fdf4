"""Reference audio registry: short voice clips users upload (e.g. for voice cloning prompts).

Clips live under ``settings.data_dir / "ref_audio"`` as ``<id>.wav`` (16-bit mono, 24 kHz, whatever
was uploaded) plus ``<id>.json`` (its metadata). The JSON is written last and removed first, so it
marks a complete entry: a crash mid-upload or mid-delete leaves at worst an orphan WAV that nobody
lists. Ids are checked against the exact shape ``new_id("ref")`` makes before any path is built, so
no request can name a file outside the folder.

Uploads are bounded before they are parsed: a ``Content-Length`` over the limit is refused without
reading the body, and a body without one (chunked) is cut off as soon as it passes the limit.

Quotas: all clips together, and each client's (by its client key when one is configured, else by
its address), are bounded in count and in bytes (``quota_exceeded``, 429). The check and the write
happen under a lock on the folder (threads and gateways sharing it alike). A write the disk does not
take (full, over a limit, unwritable), or a disk with less than ``ref_audio_min_free_mb`` free, is
``storage_unavailable`` (507), and nothing of the clip stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from fastapi import APIRouter, Depends, HTTPException, Request, Response
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from omnivox.audio.opus import decode_opus
from omnivox.audio.resample import resample
from omnivox.audio.wav import read_wav, write_wav
from omnivox.core.config import Settings
from omnivox.core.errors import (
    InvalidAudio,
    InvalidMessage,
    MessageTooLarge,
    NotFound,
    OmnivoxError,
    QuotaExceeded,
    StorageUnavailable,
    UnsupportedContent,
)
from omnivox.core.ids import new_id
from omnivox.gateway.auth import offered_key, require, require_same_origin
from omnivox.gateway.bodies import bounded_stream, declared_length

log = logging.getLogger(__name__)

STORED_RATE = 24000  # the TTS rate: clips are stored ready for a voice-cloning backend
_ID = re.compile(r"ref_[0-9a-f]{16}")
# multipart boundaries, part headers and the name field around the file itself
_FORM_OVERHEAD = 64 * 1024
_MAX_NAME = 100


@dataclass(frozen=True)
class RefAudio:
    """Metadata of one stored clip (the ``<id>.json`` file and the API's answer)."""

    id: str
    name: str
    duration_s: float
    sample_rate: int  # of the stored WAV, always STORED_RATE
    bytes: int  # size of the stored WAV
    created_at: str  # ISO 8601, UTC
    owner: str = ""  # whose quota it counts against (``owner_of``); kept, never answered

    def public(self) -> dict[str, Any]:
        """What the API answers of it."""
        view = asdict(self)
        del view["owner"]
        return view


@dataclass(frozen=True)
class RefAudioLimits:
    max_bytes: int  # the uploaded file, before conversion
    min_s: float
    max_s: float
    max_clips: int = 0  # stored at once, all together (0: no limit)
    max_total_bytes: int = 0
    max_clips_per_owner: int = 0
    max_bytes_per_owner: int = 0
    min_free_bytes: int = 0  # left free on the disk

    @classmethod
    def from_settings(cls, settings: Settings) -> RefAudioLimits:
        return cls(
            settings.ref_audio_max_bytes,
            settings.ref_audio_min_s,
            settings.ref_audio_max_s,
            max_clips=settings.ref_audio_max_clips,
            max_total_bytes=settings.ref_audio_max_total_mb * 2**20,
            max_clips_per_owner=settings.ref_audio_max_clips_per_client,
            max_bytes_per_owner=settings.ref_audio_max_mb_per_client * 2**20,
            min_free_bytes=settings.ref_audio_min_free_mb * 2**20,
        )


@dataclass(frozen=True)
class Usage:
    """What the stored clips take: all of them, and one owner's."""

    clips: int
    bytes: int
    owner_clips: int
    owner_bytes: int


def decode_upload(data: bytes, max_seconds: float | None = None) -> np.ndarray:
    """WAV (8/16/24/48 kHz, any PCM width or channel count) or Ogg-Opus -> float32 mono at 24 kHz.

    An Ogg-Opus upload is decoded no further than ``max_seconds`` (a WAV's length is its size)."""
    if data[:4] == b"OggS":
        return decode_opus(data, STORED_RATE, max_seconds)
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise InvalidAudio("the file is neither a WAV nor an Ogg-Opus file")
    audio, rate = read_wav(data)
    return resample(audio, rate, STORED_RATE)  # InvalidAudio for a rate we do not convert from


class RefAudioStore:
    """The clips in one folder. Blocking file and codec work: call it from a thread."""

    def __init__(self, root: Path, limits: RefAudioLimits) -> None:
        self.root = root
        self.limits = limits

    @classmethod
    def from_settings(cls, settings: Settings) -> RefAudioStore:
        return cls(Path(settings.data_dir) / "ref_audio", RefAudioLimits.from_settings(settings))

    def entries(self) -> list[RefAudio]:
        """Every complete entry, oldest first."""
        if not self.root.is_dir():
            return []
        refs = []
        for meta in self.root.glob("ref_*.json"):
            if _ID.fullmatch(meta.stem):
                with contextlib.suppress(NotFound):
                    refs.append(self.get(meta.stem))
        return sorted(refs, key=lambda r: (r.created_at, r.id))

    def get(self, ref_id: str) -> RefAudio:
        meta, _ = self._paths(ref_id)
        try:
            return RefAudio(**json.loads(meta.read_text()))
        except FileNotFoundError:
            raise NotFound(f"no reference audio {ref_id}") from None
        except (ValueError, TypeError) as exc:
            # a hand-edited or damaged file: hide the entry rather than fail the whole listing
            log.warning("unreadable reference audio metadata %s: %s", meta, exc)
            raise NotFound(f"no reference audio {ref_id}") from None

    def read_audio(self, ref_id: str) -> bytes:
        """The stored WAV of a listed entry."""
        self.get(ref_id)
        _, wav = self._paths(ref_id)
        try:
            return wav.read_bytes()
        except FileNotFoundError:  # deleted since get()
            raise NotFound(f"no reference audio {ref_id}") from None

    def usage(self, owner: str) -> Usage:
        clips = self.entries()
        mine = [r for r in clips if r.owner == owner]
        return Usage(len(clips), sum(r.bytes for r in clips), len(mine), sum(r.bytes for r in mine))

    def check_quota(self, owner: str, adding_bytes: int = 0) -> None:
        """``QuotaExceeded`` if one more clip of ``adding_bytes`` would pass a quota."""
        limits, used = self.limits, self.usage(owner)
        bounds = [
            (limits.max_clips_per_owner, used.owner_clips + 1, "clips of yours"),
            (limits.max_bytes_per_owner, used.owner_bytes + adding_bytes, "bytes of your clips"),
            (limits.max_clips, used.clips + 1, "clips"),
            (limits.max_total_bytes, used.bytes + adding_bytes, "bytes of clips"),
        ]
        for limit, wanted, what in bounds:
            if limit and wanted > limit:
                raise QuotaExceeded(f"the server keeps at most {limit} {what}; delete some first")

    def add(self, data: bytes, name: str | None = None, owner: str = "") -> RefAudio:
        """Validate an uploaded file, store it as a 24 kHz WAV and return its metadata."""
        if len(data) > self.limits.max_bytes:
            raise MessageTooLarge(f"the file is {len(data)} bytes; the limit is {self.limits.max_bytes}")
        audio = decode_upload(data, max_seconds=self.limits.max_s)
        duration = len(audio) / STORED_RATE
        if duration < self.limits.min_s:
            raise InvalidAudio(f"the clip is {duration:.2f} s; it must be at least {self.limits.min_s} s")
        if duration > self.limits.max_s:
            raise InvalidAudio(f"the clip is {duration:.2f} s; it must be at most {self.limits.max_s} s")
        wav = write_wav(audio, STORED_RATE)
        ref_id = new_id("ref")
        ref = RefAudio(
            id=ref_id,
            name=_clean_name(name) or ref_id,
            duration_s=round(duration, 3),
            sample_rate=STORED_RATE,
            bytes=len(wav),
            created_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            owner=owner,
        )
        meta_path, wav_path = self._paths(ref_id)
        with self._locked():
            self.check_quota(owner, len(wav))
            self._check_space(len(wav))
            try:
                _write_atomic(wav_path, wav)
                _write_atomic(meta_path, json.dumps(asdict(ref)).encode())  # last: the entry now exists
            except OSError as exc:
                for path in (meta_path, wav_path):  # nothing of it stays, temporary files included
                    path.unlink(missing_ok=True)
                    _tmp(path).unlink(missing_ok=True)
                log.warning("a reference audio clip could not be stored in %s: %s", self.root, exc)
                raise StorageUnavailable(f"the clip could not be stored: {exc.strerror or exc}") from None
        return ref

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The folder to ourselves: a quota checked is the quota written against."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)  # the folder itself: no lock file
        except OSError as exc:
            raise StorageUnavailable(f"the clip could not be stored: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _check_space(self, adding_bytes: int) -> None:
        if not self.limits.min_free_bytes:
            return
        free = shutil.disk_usage(self.root).free
        if free - adding_bytes < self.limits.min_free_bytes:
            raise StorageUnavailable(
                f"the disk keeps {self.limits.min_free_bytes // 2**20} MiB free and has {free // 2**20} MiB"
            )

    def delete(self, ref_id: str) -> None:
        meta, wav = self._paths(ref_id)
        try:
            meta.unlink()  # first: the entry disappears from listings at once
        except FileNotFoundError:
            raise NotFound(f"no reference audio {ref_id}") from None
        wav.unlink(missing_ok=True)

    def _paths(self, ref_id: str) -> tuple[Path, Path]:
        if not _ID.fullmatch(ref_id):
            # not an id we could have made ("..", "a/b", ...): it names nothing here
            raise NotFound(f"no reference audio {ref_id!r}")
        return self.root / f"{ref_id}.json", self.root / f"{ref_id}.wav"


def _tmp(path: Path) -> Path:
    return path.with_name(path.name + ".tmp")


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = _tmp(path)
    tmp.write_bytes(data)
    tmp.replace(path)


def owner_of(request: Request) -> str:
    """Whose quota an upload counts against: the client key's (a digest, never the key) when one is
    configured, else the client's address (any key passes then, so a key names nobody)."""
    key = offered_key(request.headers)
    if request.app.state.ctx.settings.key_for("client") and key:
        return "key:" + hashlib.sha256(key.encode()).hexdigest()[:32]
    return "address:" + (request.client.host if request.client else "unknown")


def _clean_name(name: str | None) -> str:
    """A display name: printable characters only, trimmed, at most _MAX_NAME of them."""
    if not name:
        return ""
    text = "".join(ch for ch in name if ch.isprintable()).strip()
    return text[:_MAX_NAME].strip()


def _filename_stem(filename: str | None) -> str:
    if not filename:
        return ""
    # browsers send a bare name, other clients may send a path (either separator)
    return PurePosixPath(filename.replace("\\", "/")).stem


# ---- HTTP

router = APIRouter(prefix="/api/assets/ref_audio", tags=["assets"])

_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "name": {"type": "string"},
                    },
                }
            }
        },
    }
}


@contextlib.contextmanager
def _as_http() -> Iterator[None]:
    """Answer an omnivox error as the other routes do: ``{"detail": {"code", "message"}}``."""
    try:
        yield
    except OmnivoxError as exc:
        raise HTTPException(exc.http_status, detail={"code": exc.code, "message": exc.message}) from None


def _store(request: Request) -> RefAudioStore:
    return RefAudioStore.from_settings(request.app.state.ctx.settings)


async def _read_upload(request: Request, max_bytes: int) -> tuple[bytes, str]:
    """The ``file`` part's bytes and the display name, reading at most about ``max_bytes``."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "multipart/form-data":
        raise UnsupportedContent("send the clip as multipart/form-data with a 'file' field")
    limit = max_bytes + _FORM_OVERHEAD
    declared = declared_length(request.headers)
    if declared is not None and declared > limit:
        raise MessageTooLarge(f"the upload is {declared} bytes; the file limit is {max_bytes}")
    parser = MultiPartParser(
        request.headers,
        bounded_stream(request.stream(), limit),
        max_files=1,
        max_fields=4,
        max_part_size=4096,
    )
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        raise InvalidMessage(f"bad multipart form: {exc.message}") from None
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InvalidMessage("the form has no 'file' field with a file in it")
        data = await upload.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise MessageTooLarge(f"the file is over the limit of {max_bytes} bytes")
        name = form.get("name")
        return data, (name if isinstance(name, str) and name.strip() else _filename_stem(upload.filename))
    finally:
        await form.close()


@router.get("", dependencies=[Depends(require("client"))])
async def list_ref_audio(request: Request) -> dict[str, Any]:
    """``{"ref_audio": [metadata, ...]}``, oldest first."""
    refs = await asyncio.to_thread(_store(request).entries)
    return {"ref_audio": [r.public() for r in refs]}


@router.post(
    "",
    status_code=201,
    openapi_extra=_UPLOAD_BODY,
    dependencies=[Depends(require_same_origin), Depends(require("client"))],
)
async def upload_ref_audio(request: Request) -> dict[str, Any]:
    """Upload a clip (form fields ``file``, optional ``name``); answers its metadata."""
    store = _store(request)
    owner = owner_of(request)
    with _as_http():
        await asyncio.to_thread(store.check_quota, owner)  # a full quota: refused before the upload is read
        data, name = await _read_upload(request, store.limits.max_bytes)
        ref = await asyncio.to_thread(store.add, data, name, owner)
    return ref.public()


@router.get("/{ref_id}", dependencies=[Depends(require("client"))])
async def get_ref_audio(ref_id: str, request: Request) -> dict[str, Any]:
    with _as_http():
        ref = await asyncio.to_thread(_store(request).get, ref_id)
    return ref.public()


@router.get("/{ref_id}/audio", dependencies=[Depends(require("client"))])
async def get_ref_audio_wav(ref_id: str, request: Request) -> Response:
    """The stored clip: 16-bit mono WAV at 24 kHz."""
    with _as_http():
        data = await asyncio.to_thread(_store(request).read_audio, ref_id)
    return Response(data, media_type="audio/wav")


@router.delete("/{ref_id}", dependencies=[Depends(require_same_origin), Depends(require("admin"))])
async def delete_ref_audio(ref_id: str, request: Request) -> dict[str, Any]:
    with _as_http():
        await asyncio.to_thread(_store(request).delete, ref_id)
    return {"id": ref_id, "deleted": True}
