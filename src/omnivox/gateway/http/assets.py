"""Reference audio registry: short voice clips users upload (e.g. for voice cloning prompts).

Clips live under ``settings.data_dir / "ref_audio"`` as ``<id>.wav`` (16-bit mono, 24 kHz, whatever
was uploaded) plus ``<id>.json`` (its metadata). The JSON is written last and removed first, so it
marks a complete entry: a crash mid-upload or mid-delete leaves at worst an orphan WAV that nobody
lists. Ids are checked against the exact shape ``new_id("ref")`` makes before any path is built, so
no request can name a file outside the folder.

Uploads are bounded before they are parsed: a ``Content-Length`` over the limit is refused without
reading the body, and a body without one (chunked) is cut off as soon as it passes the limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
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
    UnsupportedContent,
)
from omnivox.core.ids import new_id
from omnivox.gateway.auth import require, require_same_origin
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


@dataclass(frozen=True)
class RefAudioLimits:
    max_bytes: int  # the uploaded file, before conversion
    min_s: float
    max_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> RefAudioLimits:
        return cls(settings.ref_audio_max_bytes, settings.ref_audio_min_s, settings.ref_audio_max_s)


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

    def add(self, data: bytes, name: str | None = None) -> RefAudio:
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
        )
        meta_path, wav_path = self._paths(ref_id)
        self.root.mkdir(parents=True, exist_ok=True)
        _write_atomic(wav_path, wav)
        _write_atomic(meta_path, json.dumps(asdict(ref)).encode())  # last: the entry now exists
        return ref

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


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


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
    return {"ref_audio": [asdict(r) for r in refs]}


@router.post(
    "",
    status_code=201,
    openapi_extra=_UPLOAD_BODY,
    dependencies=[Depends(require_same_origin), Depends(require("client"))],
)
async def upload_ref_audio(request: Request) -> dict[str, Any]:
    """Upload a clip (form fields ``file``, optional ``name``); answers its metadata."""
    store = _store(request)
    with _as_http():
        data, name = await _read_upload(request, store.limits.max_bytes)
        ref = await asyncio.to_thread(store.add, data, name)
    return asdict(ref)


@router.get("/{ref_id}", dependencies=[Depends(require("client"))])
async def get_ref_audio(ref_id: str, request: Request) -> dict[str, Any]:
    with _as_http():
        ref = await asyncio.to_thread(_store(request).get, ref_id)
    return asdict(ref)


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
