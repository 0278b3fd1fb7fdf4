"""Ogg page framing (RFC 3533): split a byte stream into CRC-checked pages, resynchronising on damage.

sphn's Opus reader takes raw Ogg bytes, but one bad byte sends it into an error it never leaves, and
a stream that starts mid-page makes it fail outright. Framing the pages here first means the reader
only ever sees whole, checksummed pages: bytes before the first page are skipped, a damaged page is
dropped and parsing resumes at the next capture pattern, and the caller learns what was dropped.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

CAPTURE = b"OggS"
HEADER_BYTES = 27
MAX_PAGE_BYTES = HEADER_BYTES + 255 + 255 * 255
FLAG_CONTINUED = 0x01
FLAG_BOS = 0x02
FLAG_EOS = 0x04

_HEADER = struct.Struct("<4sBBqIIIB")
# Ogg's CRC-32 is MSB-first with zero init and no final xor; zlib's is the bit-reflected variant with
# ~0 init and final xor. Reversing the bits of every byte and of the result turns one into the other,
# and xoring zlib's CRC of as many zero bytes cancels its init/xor, so the whole check runs in C.
_REV8 = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))


def _rev32(v: int) -> int:
    return int(f"{v:032b}"[::-1], 2)


def ogg_crc(data: bytes) -> int:
    """The Ogg page checksum of ``data`` (a page with its CRC field zeroed)."""
    return _rev32(zlib.crc32(data.translate(_REV8)) ^ zlib.crc32(bytes(len(data))))


@dataclass(frozen=True)
class OggPage:
    flags: int  # FLAG_* bits: continued packet, beginning of stream, end of stream
    granule: int  # codec position at the end of the page (Opus: 48 kHz samples)
    serial: int  # logical stream this page belongs to
    sequence: int  # page number within its logical stream
    raw: bytes  # the whole page, header included, as it arrived

    @property
    def bos(self) -> bool:
        return bool(self.flags & FLAG_BOS)

    @property
    def eos(self) -> bool:
        return bool(self.flags & FLAG_EOS)


def build_page(flags: int, granule: int, serial: int, sequence: int, packets: list[bytes]) -> bytes:
    """A valid Ogg page holding whole ``packets`` (used to make test streams and by tools)."""
    lacing = bytearray()
    for p in packets:
        lacing += b"\xff" * (len(p) // 255) + bytes([len(p) % 255])
    if len(lacing) > 255:
        raise ValueError("too many segments for one page")
    header = _HEADER.pack(CAPTURE, 0, flags, granule, serial, sequence, 0, len(lacing)) + bytes(lacing)
    page = header + b"".join(packets)
    crc = ogg_crc(page)
    return page[:22] + struct.pack("<I", crc) + page[26:]


def split_pages(data: bytes) -> list[OggPage]:
    """The pages of well-formed Ogg bytes that hold whole pages only (an encoder's own output).

    Not for bytes from a client: no checksum is checked and there is no resynchronisation; bytes that
    are not a run of whole pages raise ``ValueError`` (use ``OggPageParser`` for untrusted input).
    """
    pages: list[OggPage] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < HEADER_BYTES:
            raise ValueError(f"{len(data) - pos} bytes after the last whole Ogg page")
        capture, _version, flags, granule, serial, sequence, _crc, nseg = _HEADER.unpack_from(data, pos)
        if capture != CAPTURE:
            raise ValueError(f"no Ogg page at byte {pos}")
        body = HEADER_BYTES + nseg
        end = pos + body + sum(data[pos + HEADER_BYTES : pos + body])
        if end > len(data):
            raise ValueError(f"the Ogg page at byte {pos} is incomplete")
        pages.append(OggPage(flags, granule, serial, sequence, bytes(data[pos:end])))
        pos = end
    return pages


def restamp_page(raw: bytes, *, serial: int, flags: int) -> bytes:
    """``raw`` with another stream serial and header flags, and the checksum that goes with them."""
    page = bytearray(raw)
    page[5] = flags
    struct.pack_into("<I", page, 14, serial)
    struct.pack_into("<I", page, 22, 0)
    struct.pack_into("<I", page, 22, ogg_crc(bytes(page)))
    return bytes(page)


class OggPageParser:
    """Incremental page framer: ``feed`` bytes in any split, get back the complete valid pages.

    Counters say what was thrown away: ``skipped_bytes`` (not part of any valid page, e.g. the tail
    of a page the stream started in) and ``corrupt_pages`` (capture pattern found, checksum or
    header wrong). ``feed`` never raises on content.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self.skipped_bytes = 0
        self.corrupt_pages = 0

    def reset(self) -> None:
        self._buf.clear()

    @property
    def buffered(self) -> int:
        """Bytes held while waiting for the rest of a page."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[OggPage]:
        self._buf += data
        pages: list[OggPage] = []
        while True:
            start = self._buf.find(CAPTURE)
            if start < 0:
                # keep a possible partial capture pattern at the end, drop the rest
                keep = min(len(self._buf), len(CAPTURE) - 1)
                self._drop(len(self._buf) - keep)
                return pages
            self._drop(start)
            status, page = self._try_page()
            if page is not None:
                del self._buf[: len(page.raw)]
                pages.append(page)
            elif status == "bad" or self._later_page_is_valid():
                # a damaged page: skip its capture pattern and resync at the next one. An
                # incomplete page counts as damaged once a valid page is seen after it.
                self.corrupt_pages += 1
                self._drop(len(CAPTURE))
            else:
                return pages  # incomplete: wait for the rest

    def _drop(self, n: int) -> None:
        if n > 0:
            del self._buf[:n]
            self.skipped_bytes += n

    def _try_page(self, offset: int = 0) -> tuple[str, OggPage | None]:
        """("page", page) for a valid page at ``offset``, ("bad", None) or ("more", None)."""
        buf = self._buf
        if len(buf) - offset < HEADER_BYTES:
            return "more", None
        _cap, version, flags, granule, serial, seq, crc, nseg = _HEADER.unpack_from(buf, offset)
        if version != 0 or flags & ~0x07:
            return "bad", None
        if len(buf) - offset < HEADER_BYTES + nseg:
            return "more", None
        body = sum(buf[offset + HEADER_BYTES : offset + HEADER_BYTES + nseg])
        total = HEADER_BYTES + nseg + body
        if len(buf) - offset < total:
            return "more", None
        raw = bytes(buf[offset : offset + total])
        if ogg_crc(raw[:22] + b"\0\0\0\0" + raw[26:]) != crc:
            return "bad", None
        return "page", OggPage(flags, granule, serial, seq, raw)

    def _later_page_is_valid(self) -> bool:
        """Whether a complete, checksummed page starts after the incomplete one at offset 0.

        A damaged length field can make a page look up to 64 KiB long; without this check the
        parser would sit on seconds of good audio waiting for bytes that never come.
        """
        pos = self._buf.find(CAPTURE, 1)
        while pos > 0:
            status, _ = self._try_page(pos)
            if status == "page":
                return True
            pos = self._buf.find(CAPTURE, pos + 1)
        return False
