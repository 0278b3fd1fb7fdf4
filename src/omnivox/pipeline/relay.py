"""The relay: how a payload's arrays (audio, token ids, embeddings) travel between processes.

A payload is a dict of plain values and numpy arrays (top level only). ``pack`` turns it into a
``messages.Payload`` plus the buffers to send after the header; ``unpack`` does the reverse:

- same host, array of ``shm_min_bytes`` or more: the bytes are written once (``write(2)``) into a
  POSIX shared-memory segment of their own (``/dev/shm``); the reader maps it read-only, wraps the
  mapping (``np.frombuffer``: no copy) and unlinks the name at once (the mapping lives as long as the
  array). Nothing is serialised and nothing is pickled.
- another host, or a small array: the array's own buffer goes as a ZeroMQ frame (sent without a
  copy), and the reader wraps the received frame (``np.frombuffer``: no copy either; read-only).

Limits are data: a payload over ``max_payload_bytes`` is ``PayloadTooLarge`` before anything is
copied; more than ``capacity_bytes`` of this process's segments still unread is ``RelayFull``; a
segment that is gone when its reader comes (its producer died and it was swept) is ``PayloadLost``.

Leaks. Segments are named ``ovx_<pid>_<n>_<random>``: each relay unlinks its own that nobody read
within ``orphan_after_s`` (``sweep``), and the segments of processes that no longer exist (a producer
killed mid-request). The segments are plain files of ``/dev/shm`` (not ``multiprocessing``'s
``SharedMemory``, whose resource tracker would unlink a segment when its *reader* exits): ownership
passes to the reader by protocol.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import mmap
import os
import re
import secrets
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from omnivox.core.errors import BadPipelineMessage, PayloadLost, PayloadTooLarge, RelayFull
from omnivox.pipeline.messages import ArrayRef, Payload

MiB = 1 << 20
DTYPES = frozenset({"float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "bool"})
PREFIX = "ovx_"
_NAME = re.compile(r"^ovx_(\d+)_(\d+)_[0-9a-f]{8}$")
_SHM_DIR = Path("/dev/shm")
_SEP = "\x1f"  # joins the path of an array nested in dicts

Buffer = bytes | memoryview


@functools.cache
def host_id() -> str:
    """This machine's identity for "may we share memory": the host name and the kernel's boot id."""
    boot = ""
    with contextlib.suppress(OSError):
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return hashlib.sha1(f"{socket.gethostname()}/{boot}".encode()).hexdigest()[:16]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def relay_from(settings: Any) -> PayloadRelay:
    """A relay with the limits of ``PipelineSettings`` (``settings`` has its fields)."""
    return PayloadRelay(
        max_payload_bytes=settings.relay_max_payload_bytes,
        capacity_bytes=settings.relay_capacity_bytes,
        use_shm=settings.relay_shared_memory,
    )


def segments() -> list[str]:
    """The relay segments that exist on this host now (for leak checks)."""
    try:
        return sorted(p.name for p in _SHM_DIR.iterdir() if _NAME.match(p.name))
    except OSError:
        return []


class PayloadRelay:
    """One process's side of the relay (not thread-safe: one IO loop uses it)."""

    def __init__(
        self,
        *,
        max_payload_bytes: int = 64 * MiB,
        capacity_bytes: int = 256 * MiB,
        shm_min_bytes: int = 32 * 1024,
        orphan_after_s: float = 30.0,
        use_shm: bool = True,
    ) -> None:
        self.max_payload_bytes = max_payload_bytes
        self.capacity_bytes = capacity_bytes
        self.shm_min_bytes = shm_min_bytes
        self.orphan_after_s = orphan_after_s
        self.use_shm = use_shm and _SHM_DIR.is_dir()
        self._pid = os.getpid()
        self._counter = itertools.count()
        self._created: dict[str, tuple[int, float]] = {}  # segment -> (bytes, created at)
        self.bytes_sent = 0
        self.segments_created = 0

    # ---- writing

    def pack(self, values: dict[str, Any] | None, same_host: bool) -> tuple[Payload, list[Buffer]]:
        """The payload for ``values`` and the frames to send after the header. Arrays may sit in
        nested dicts too (a fan-in's inputs by source): each is named by its path."""
        if not values:
            return Payload(), []
        found: list[tuple[tuple[str, ...], np.ndarray]] = []
        meta = _split(values, (), found)
        total = sum(a.nbytes for _, a in found)
        if total > self.max_payload_bytes:
            raise PayloadTooLarge(
                f"payload of {total} bytes is over the relay's limit of {self.max_payload_bytes}",
                limit=self.max_payload_bytes,
            )
        arrays: dict[str, ArrayRef] = {}
        frames: list[Buffer] = []
        for path, value in found:
            array = np.ascontiguousarray(value).reshape(np.shape(value))  # a 0-d array stays 0-d
            if array.dtype.name not in DTYPES:
                raise TypeError(f"the relay does not carry {array.dtype.name} arrays ({'/'.join(path)})")
            key = _SEP.join(path)
            if same_host and self.use_shm and array.nbytes and array.nbytes >= self.shm_min_bytes:
                arrays[key] = self._to_segment(array)
            else:
                arrays[key] = ArrayRef(array.dtype.name, array.shape, array.nbytes, frame=len(frames))
                frames.append(array.data.cast("B") if array.nbytes else b"")
        self.bytes_sent += total
        return Payload(meta=meta, arrays=arrays), frames

    def _to_segment(self, array: np.ndarray) -> ArrayRef:
        if self.outstanding_bytes() + array.nbytes > self.capacity_bytes:
            raise RelayFull(
                f"the relay holds {self.outstanding_bytes()} unread bytes (limit {self.capacity_bytes})"
            )
        name = f"{PREFIX}{self._pid}_{next(self._counter)}_{secrets.token_hex(4)}"
        # written with write(2), not through a mapping: the kernel fills the new pages as it copies
        # (no page fault per page), and no mapping is left to undo
        fd = os.open(_SHM_DIR / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        try:
            view = array.data.cast("B")
            done = 0
            while done < len(view):
                done += os.write(fd, view[done:])
        finally:
            os.close(fd)
        self._created[name] = (array.nbytes, time.monotonic())
        self.segments_created += 1
        return ArrayRef(array.dtype.name, array.shape, array.nbytes, segment=name)

    def outstanding_bytes(self) -> int:
        """Bytes of this process's segments not yet read (read ones are forgotten here)."""
        for name in [n for n in self._created if not (_SHM_DIR / n).exists()]:
            del self._created[name]
        return sum(size for size, _ in self._created.values())

    # ---- reading

    def unpack(self, payload: Payload, frames: Sequence[Any]) -> dict[str, Any]:
        """The values of ``payload``: its meta plus its arrays (each segment read once and unlinked).

        Raises ``BadPipelineMessage`` for a reference that does not add up, ``PayloadTooLarge`` past
        the limit and ``PayloadLost`` for a segment that is gone. Every segment of the payload is
        consumed whatever fails, so a refused payload leaks nothing."""
        values: dict[str, Any] = dict(payload.meta)  # nested dicts are rebuilt by _put
        error: Exception | None = None
        total = sum(ref.nbytes for ref in payload.arrays.values())
        for key, ref in payload.arrays.items():
            try:
                if error is not None or total > self.max_payload_bytes:
                    self._drop(ref)
                    if error is None:
                        error = PayloadTooLarge(
                            f"payload of {total} bytes is over the limit of {self.max_payload_bytes}"
                        )
                    continue
                _put(values, key.split(_SEP), self._read(ref, frames))
            except (BadPipelineMessage, PayloadLost) as exc:
                error = error or exc
        if error is not None:
            raise error
        return values

    def discard(self, payload: Payload | None) -> None:
        """Consume a payload's segments unread (its message is dropped: aborted, unknown, refused)."""
        if payload is None:
            return
        for ref in payload.arrays.values():
            self._drop(ref)

    def _read(self, ref: ArrayRef, frames: Sequence[Any]) -> np.ndarray:
        dtype = self._check(ref)
        if ref.segment is None:
            if not 0 <= ref.frame < len(frames):
                raise BadPipelineMessage(f"array in frame {ref.frame}, but {len(frames)} frames came")
            frame = frames[ref.frame]
            buf = frame.buffer if hasattr(frame, "buffer") else memoryview(frame)
            if buf.nbytes != ref.nbytes:
                raise BadPipelineMessage(f"frame of {buf.nbytes} bytes for an array of {ref.nbytes}")
            return np.frombuffer(buf, dtype=dtype).reshape(ref.shape)
        try:
            fd = os.open(_SHM_DIR / ref.segment, os.O_RDONLY)
        except FileNotFoundError:
            raise PayloadLost(f"payload segment {ref.segment} is gone (its producer died?)") from None
        try:
            if os.fstat(fd).st_size < ref.nbytes:
                raise BadPipelineMessage(f"segment too small for an array of {ref.nbytes} bytes")
            if not ref.nbytes:
                return np.empty(ref.shape, dtype)
            # mapped, not copied: the array keeps the mapping alive after the name is unlinked
            mapped = mmap.mmap(fd, ref.nbytes, prot=mmap.PROT_READ)
            return np.frombuffer(mapped, dtype=dtype).reshape(ref.shape)
        finally:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(_SHM_DIR / ref.segment)

    def _check(self, ref: ArrayRef) -> np.dtype:
        if ref.dtype not in DTYPES:
            raise BadPipelineMessage(f"array of dtype {ref.dtype!r} refused")
        if ref.segment is not None and not _NAME.match(ref.segment):
            raise BadPipelineMessage(f"{ref.segment!r} is not a relay segment name")
        dtype = np.dtype(ref.dtype)
        if any(d < 0 for d in ref.shape) or int(np.prod(ref.shape)) * dtype.itemsize != ref.nbytes:
            raise BadPipelineMessage(f"shape {ref.shape} of {ref.dtype} is not {ref.nbytes} bytes")
        return dtype

    def _drop(self, ref: ArrayRef) -> None:
        if ref.segment is not None and _NAME.match(ref.segment):
            _unlink(ref.segment)

    # ---- cleaning

    def sweep(self) -> int:
        """Unlink this process's segments nobody read in ``orphan_after_s`` and every segment of a
        process that is gone. Returns how many went."""
        now = time.monotonic()
        gone = 0
        for name, (_, created) in list(self._created.items()):
            if now - created > self.orphan_after_s:
                gone += _unlink(name)
                del self._created[name]
        for name in segments():
            m = _NAME.match(name)
            if m is not None and int(m.group(1)) != self._pid and not _alive(int(m.group(1))):
                gone += _unlink(name)
        return gone

    def close(self) -> None:
        """Unlink everything this process wrote that is still unread."""
        for name in list(self._created):
            _unlink(name)
        self._created.clear()


def _split(values: dict[str, Any], path: tuple[str, ...], found: list) -> dict[str, Any]:
    """``values`` without its arrays (collected into ``found`` with their paths)."""
    meta: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, np.ndarray):
            found.append(((*path, key), value))
        elif isinstance(value, dict):
            meta[key] = _split(value, (*path, key), found)
        else:
            meta[key] = value
    return meta


def _put(values: dict[str, Any], path: list[str], array: np.ndarray) -> None:
    for key in path[:-1]:
        inner = values.get(key)
        if not isinstance(inner, dict):
            inner = values[key] = {}
        values = inner
    values[path[-1]] = array


def _unlink(name: str) -> int:
    try:
        os.unlink(_SHM_DIR / name)
    except FileNotFoundError:
        return 0
    return 1
