"""RFC 4733 telephone events: DTMF digits carried in RTP (``telephone-event/8000``).

An event is sent as several packets sharing one RTP timestamp, the last ones with the end bit
set (three times, for loss). ``DtmfReceiver`` reports each digit once, at its first end packet (or
when a new event begins before any end packet of the last one arrived). A late or repeated packet
of an event already reported (a redundant end packet the network delayed past the next key press)
is ignored: it neither reports that digit again nor ends the event under way early.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass

DIGITS = "0123456789*#ABCD"
EVENT = struct.Struct("!BBH")
_FINISHED_KEPT = 16  # events whose late packets are still recognised (key presses a few seconds back)


class InvalidDtmf(ValueError):
    """A telephone-event payload that does not hold a DTMF digit."""


@dataclass(frozen=True)
class DtmfEvent:
    digit: str
    end: bool
    volume: int
    duration: int  # samples at 8 kHz


def parse_event(payload: bytes) -> DtmfEvent:
    """One telephone-event payload; raises ``InvalidDtmf``."""
    if len(payload) < EVENT.size:
        raise InvalidDtmf("shorter than a telephone event")
    event, flags, duration = EVENT.unpack_from(payload)
    if event >= len(DIGITS):
        raise InvalidDtmf(f"event {event} is not a DTMF digit")
    return DtmfEvent(DIGITS[event], bool(flags & 0x80), flags & 0x3F, duration)


def event_payloads(digit: str, duration_ms: int = 160, step_ms: int = 20, volume: int = 10) -> list[bytes]:
    """The payloads of one key press: an update every ``step_ms``, then three end packets."""
    if len(digit) != 1 or digit.upper() not in DIGITS:
        raise InvalidDtmf(f"{digit!r} is not a DTMF digit (0-9, *, #, A-D)")
    code = DIGITS.index(digit.upper())
    out = [EVENT.pack(code, volume, 8 * ms) for ms in range(step_ms, duration_ms, step_ms)]
    end = EVENT.pack(code, 0x80 | volume, 8 * duration_ms)
    return [*out, end, end, end]


class DtmfReceiver:
    """Turns one stream's telephone-event packets into digits, each reported once."""

    def __init__(self) -> None:
        self._current: int | None = None  # the RTP timestamp of the event under way, not yet reported
        self._digit: str | None = None
        self._finished: deque[int] = deque(maxlen=_FINISHED_KEPT)  # timestamps of events reported

    def feed(self, timestamp: int, payload: bytes) -> list[str]:
        """The digits this packet completes (raises ``InvalidDtmf``)."""
        event = parse_event(payload)
        if timestamp in self._finished:
            return []  # a late or repeated packet of an event already reported
        out: list[str] = []
        if timestamp != self._current:
            if self._current is not None and self._digit is not None:
                self._finished.append(self._current)
                out.append(self._digit)  # the last event's end packets were all lost
            self._current, self._digit = timestamp, event.digit
        if event.end:
            self._finished.append(timestamp)
            self._current, self._digit = None, None
            out.append(event.digit)
        return out
