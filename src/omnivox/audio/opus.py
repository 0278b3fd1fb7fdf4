"""Ogg-Opus streams in and out (24 kHz mono by default) with sphn, robust to damaged input.

Browsers (MediaRecorder, opus-recorder) and the Unmute client send Ogg-Opus in arbitrary byte
chunks. ``OpusDecoder`` frames those bytes into checksummed Ogg pages before sphn sees them (see
``omnivox.audio.ogg``), so:

- a stream that starts mid-way (a client reconnecting, a capture joined late) decodes from its first
  whole page; the bytes before it are skipped;
- stale pages (replayed or duplicated, an old sequence number, or from a logical stream other than
  the current one) are dropped and counted, not decoded twice;
- a new beginning-of-stream page (the client restarted its encoder) starts a fresh decoder;
- damaged bytes raise ``InvalidAudio`` and the decoder stays usable: it resynchronises at the next
  page, and audio decoded earlier in the failing call is returned by the next call.

``OpusEncoder`` turns float samples into an Ogg-Opus byte stream that any such client can play. Each
stream it writes has a fresh random serial number (sphn writes every stream as serial 42, so a client
could not tell one response's stream from the next), and ``flush`` ends it with an end-of-stream page.
"""

from __future__ import annotations

import secrets

import numpy as np
import sphn

from omnivox.audio.ogg import FLAG_EOS, OggPage, OggPageParser, build_page, restamp_page, split_pages
from omnivox.audio.pcm import as_float32
from omnivox.core.errors import InvalidAudio

OPUS_RATES: tuple[int, ...] = (8000, 12000, 16000, 24000, 48000)
DEFAULT_RATE = 24000
# sphn's writer encodes 960-sample packets at any rate (40 ms at 24 kHz); feeding it whole packets
# keeps its buffering predictable and lets ``flush`` pad exactly the missing part.
_PACKET = 960


def _check_rate(rate: int) -> int:
    if rate not in OPUS_RATES:
        raise InvalidAudio(f"Opus cannot run at {rate} Hz; use one of {OPUS_RATES}", sample_rate=rate)
    return rate


class OpusEncoder:
    """Float samples -> Ogg-Opus bytes. The first output carries the Opus headers.

    One instance writes one logical stream at a time: ``flush`` ends it (its last page is marked
    end-of-stream) and the next ``encode`` starts a new one, with new headers and a new serial.
    """

    def __init__(self, sample_rate: int = DEFAULT_RATE) -> None:
        self.sample_rate = _check_rate(sample_rate)
        self.serial = 0
        self.reset()

    def reset(self) -> None:
        """Start a new Ogg stream (new headers, new serial); anything not yet flushed is dropped."""
        self._writer: sphn.OpusStreamWriter | None = None  # made on the first packet of the stream
        self._pending = np.zeros(0, np.float32)
        self._last: OggPage | None = None  # the last page written in this stream
        previous = self.serial
        while self.serial == previous:  # random, and never the serial of the stream just ended
            self.serial = secrets.randbits(32)

    def encode(self, audio: np.ndarray) -> bytes:
        """Encode the next samples; returns the bytes of the pages completed so far (maybe none)."""
        a = np.concatenate([self._pending, as_float32(audio)])
        whole = len(a) - len(a) % _PACKET
        self._pending = a[whole:]
        return b"".join(page for i in range(0, whole, _PACKET) for page in self._append(a[i : i + _PACKET]))

    def flush(self) -> bytes:
        """End the stream: pad the last partial packet with silence and return everything still held
        back, its last page marked end-of-stream; empty if the stream never started. The next
        ``encode`` starts a new stream."""
        last = self._last
        if last is None and not len(self._pending):
            self.reset()
            return b""
        pages: list[bytes] = []
        if len(self._pending):
            silence = np.zeros(_PACKET - len(self._pending), np.float32)
            pages = self._append(np.concatenate([self._pending, silence]))
            last = self._last
        assert last is not None  # a whole packet always makes at least one page
        if pages:  # the padded packet's page ends the stream
            pages[-1] = restamp_page(pages[-1], serial=self.serial, flags=last.flags | FLAG_EOS)
        else:  # every page was sent already: end the stream with a page that holds no packet
            pages.append(build_page(FLAG_EOS, last.granule, self.serial, last.sequence + 1, []))
        self.reset()
        return b"".join(pages)

    def _append(self, packet: np.ndarray) -> list[bytes]:
        """One whole packet into sphn's writer; its pages come back under this stream's serial."""
        if self._writer is None:
            self._writer = sphn.OpusStreamWriter(self.sample_rate)
        pages = []
        for page in split_pages(self._writer.append_pcm(packet)):
            raw = restamp_page(page.raw, serial=self.serial, flags=page.flags)
            self._last = OggPage(page.flags, page.granule, self.serial, page.sequence, raw)
            pages.append(raw)
        return pages


class OpusDecoder:
    """Ogg-Opus bytes in any split -> float32 samples at ``sample_rate``.

    Counters (cumulative since construction): ``pages`` decoded, ``stale_pages`` dropped as stale,
    ``corrupt_pages`` dropped as damaged, ``skipped_bytes`` not belonging to any valid page.
    """

    def __init__(self, sample_rate: int = DEFAULT_RATE) -> None:
        self.sample_rate = _check_rate(sample_rate)
        self.pages = 0
        self.stale_pages = 0
        self._parser = OggPageParser()
        self.reset()

    @property
    def corrupt_pages(self) -> int:
        return self._parser.corrupt_pages

    @property
    def skipped_bytes(self) -> int:
        return self._parser.skipped_bytes

    def reset(self) -> None:
        """Forget the current stream: the next bytes may start a new one anywhere."""
        self._parser.reset()
        self._reader = sphn.OpusStreamReader(self.sample_rate)
        self._serial: int | None = None
        self._last_sequence = -1
        self._carry: list[np.ndarray] = []

    def decode(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        """Decode the next bytes; returns the samples they completed (possibly none)."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidAudio(f"Opus data must be bytes, got {type(data).__name__}")
        corrupt_before = self._parser.corrupt_pages
        out, self._carry = self._carry, []
        failure: str | None = None
        for page in self._parser.feed(bytes(data)):
            if not self._accept(page):
                self.stale_pages += 1
                continue
            try:
                pcm = self._reader.append_bytes(page.raw)
            except (ValueError, RuntimeError, OSError) as exc:
                # sphn does not recover from a bad packet: start a fresh reader at the next page
                self._reader = sphn.OpusStreamReader(self.sample_rate)
                failure = f"undecodable Opus packet: {exc}"
                continue
            self.pages += 1
            if pcm is not None and len(pcm):
                out.append(np.asarray(pcm, np.float32).reshape(-1))
        audio = np.concatenate(out) if out else np.zeros(0, np.float32)
        dropped = self._parser.corrupt_pages - corrupt_before
        if dropped and failure is None:
            failure = f"{dropped} damaged Ogg page(s) dropped"
        if failure is not None:
            self._carry = [audio] if len(audio) else []
            raise InvalidAudio(f"bad Ogg-Opus data: {failure}", corrupt_pages=dropped)
        return audio

    def _accept(self, page: OggPage) -> bool:
        """Whether ``page`` continues the current stream (or starts a new one)."""
        if page.bos:
            if self._serial is not None:
                # the client restarted its encoder: old decoder state belongs to the old stream
                self._reader = sphn.OpusStreamReader(self.sample_rate)
            self._serial, self._last_sequence = page.serial, page.sequence
            return True
        if self._serial is None:  # joined mid-way: adopt this stream
            self._serial, self._last_sequence = page.serial, page.sequence
            return True
        if page.serial != self._serial or page.sequence <= self._last_sequence:
            return False
        self._last_sequence = page.sequence
        return True


def encode_opus(audio: np.ndarray, sample_rate: int = DEFAULT_RATE) -> bytes:
    """A whole clip -> one Ogg-Opus stream."""
    enc = OpusEncoder(sample_rate)
    return enc.encode(audio) + enc.flush()


_SLICE = 512  # bytes decoded at a time when the length is bounded (a few seconds of audio at most)


def decode_opus(data: bytes, sample_rate: int = DEFAULT_RATE, max_seconds: float | None = None) -> np.ndarray:
    """A whole Ogg-Opus stream -> float32 samples; any damage raises ``InvalidAudio``.

    With ``max_seconds`` the stream is decoded a slice at a time and refused as soon as it passes
    that length: a small file of tiny packets (an "Opus bomb") never decodes to hours of audio."""
    dec = OpusDecoder(sample_rate)
    if max_seconds is None:
        audio = dec.decode(data)
    else:
        limit = int(max_seconds * sample_rate)
        parts, total = [], 0
        for at in range(0, len(data), _SLICE):
            part = dec.decode(data[at : at + _SLICE])
            total += len(part)
            if total > limit:
                raise InvalidAudio(f"the audio is longer than {max_seconds:g} s", limit_s=max_seconds)
            parts.append(part)
        audio = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    if dec.pages == 0 and len(data):
        raise InvalidAudio("no Ogg-Opus pages found in the data")
    return audio
