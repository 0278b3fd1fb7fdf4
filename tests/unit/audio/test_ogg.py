"""Ogg page framing: the checksum, page building, and a framer that survives any split and any damage."""

from __future__ import annotations

import itertools
import struct

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from omnivox.audio.ogg import (
    CAPTURE,
    FLAG_BOS,
    FLAG_CONTINUED,
    FLAG_EOS,
    HEADER_BYTES,
    MAX_PAGE_BYTES,
    OggPage,
    OggPageParser,
    build_page,
    ogg_crc,
    restamp_page,
    split_pages,
)
from omnivox.audio.opus import encode_opus

SERIAL = 0x1234


def crc_reference(data: bytes) -> int:
    """RFC 3533's CRC-32 bit by bit: polynomial 0x04C11DB7, MSB first, zero init, no final xor."""
    crc = 0
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
            crc &= 0xFFFFFFFF
    return crc


def page(sequence: int, packets: list[bytes] | None = None, flags: int = 0, serial: int = SERIAL) -> bytes:
    return build_page(flags, 960 * sequence, serial, sequence, [b"abc"] if packets is None else packets)


def edited(raw: bytes, pos: int, value: int, fix_crc: bool = False) -> bytes:
    """``raw`` with byte ``pos`` set to ``value`` (and the checksum recomputed if asked)."""
    b = bytearray(raw)
    b[pos] = value
    if fix_crc:
        b[22:26] = b"\0\0\0\0"
        b[22:26] = struct.pack("<I", ogg_crc(bytes(b)))
    return bytes(b)


def feed_in_pieces(parser: OggPageParser, data: bytes, cuts: list[int]) -> list[OggPage]:
    pages: list[OggPage] = []
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(data)), len(data)]
    for a, b in itertools.pairwise(bounds):
        pages += parser.feed(data[a:b])
    return pages


@pytest.fixture(scope="module")
def stream() -> bytes:
    t = np.arange(24000) / 24000
    return encode_opus((0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32))


def test_ogg_crc_matches_the_encoder(stream: bytes) -> None:
    page = OggPageParser().feed(stream)[0]
    (crc,) = struct.unpack_from("<I", page.raw, 22)
    assert page.flags & FLAG_BOS
    assert ogg_crc(page.raw[:22] + b"\0\0\0\0" + page.raw[26:]) == crc


def test_crc_known_values() -> None:
    assert ogg_crc(b"") == 0
    assert ogg_crc(b"\x00" * 16) == 0  # zero init and no final xor: zeros checksum to zero
    assert ogg_crc(b"\x01") == 0x04C11DB7  # a single set bit gives the polynomial
    assert ogg_crc(b"123456789") == 0x89A1897F  # the standard check string


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_crc_matches_the_bitwise_definition(data: bytes) -> None:
    assert ogg_crc(data) == crc_reference(data)


def test_every_page_of_a_real_stream_is_checksummed(stream: bytes) -> None:
    pages = OggPageParser().feed(stream)
    assert b"".join(p.raw for p in pages) == stream
    assert [p.sequence for p in pages] == list(range(len(pages)))
    assert len({p.serial for p in pages}) == 1
    granules = [p.granule for p in pages]
    assert granules == sorted(granules)


def test_built_page_layout() -> None:
    raw = build_page(FLAG_BOS | FLAG_EOS, 123456789012, 77, 5, [b"hello", b"", b"x" * 300])
    cap, version, flags, granule, serial, seq, crc, nseg = struct.unpack_from("<4sBBqIIIB", raw)
    assert (cap, version, flags, granule, serial, seq) == (
        CAPTURE,
        0,
        FLAG_BOS | FLAG_EOS,
        123456789012,
        77,
        5,
    )
    lacing = list(raw[HEADER_BYTES : HEADER_BYTES + nseg])
    assert lacing == [5, 0, 255, 45]
    assert raw[HEADER_BYTES + nseg :] == b"hello" + b"x" * 300
    assert crc == ogg_crc(raw[:22] + b"\0\0\0\0" + raw[26:])


@pytest.mark.parametrize(
    ("length", "lacing"),
    [(0, [0]), (1, [1]), (254, [254]), (255, [255, 0]), (256, [255, 1]), (510, [255, 255, 0])],
)
def test_lacing_values_end_each_packet_with_less_than_255(length: int, lacing: list[int]) -> None:
    raw = build_page(0, 0, 1, 0, [b"p" * length])
    assert list(raw[HEADER_BYTES : HEADER_BYTES + raw[26]]) == lacing
    assert OggPageParser().feed(raw)[0].raw == raw


def test_a_page_holds_at_most_255_segments() -> None:
    biggest = build_page(0, 0, 1, 0, [b"p" * (254 * 255 + 254)])  # 254 full segments + 1 short
    assert biggest[26] == 255 and len(biggest) <= MAX_PAGE_BYTES
    assert OggPageParser().feed(biggest)[0].raw == biggest
    with pytest.raises(ValueError):
        build_page(0, 0, 1, 0, [b""] * 256)
    with pytest.raises(ValueError):
        build_page(0, 0, 1, 0, [b"p" * (255 * 255)])


def test_page_fields_and_flags() -> None:
    parser = OggPageParser()
    first, middle, last = parser.feed(
        page(0, flags=FLAG_BOS) + page(1, flags=FLAG_CONTINUED) + page(2, flags=FLAG_EOS, serial=9)
    )
    assert first.bos and not first.eos and first.sequence == 0 and first.serial == SERIAL
    assert not middle.bos and not middle.eos and middle.flags == FLAG_CONTINUED
    assert last.eos and not last.bos and last.serial == 9 and last.granule == 1920


@settings(max_examples=100, deadline=None)
@given(
    packets=st.lists(st.lists(st.binary(max_size=600), min_size=1, max_size=4), min_size=1, max_size=5),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
)
def test_any_split_gives_the_same_pages(packets: list[list[bytes]], cuts: list[int]) -> None:
    raws = [page(i, p) for i, p in enumerate(packets)]
    parser = OggPageParser()
    pages = feed_in_pieces(parser, b"".join(raws), cuts)
    assert [p.raw for p in pages] == raws
    assert parser.skipped_bytes == parser.corrupt_pages == parser.buffered == 0


def test_a_partial_capture_pattern_is_kept_for_the_next_feed() -> None:
    good = page(0)
    parser = OggPageParser()
    assert parser.feed(b"xxxxOg") == []
    assert parser.buffered == 3 and parser.skipped_bytes == 3  # "xOg" kept: it may become "OggS"
    assert [p.raw for p in parser.feed(good[2:])] == [good]
    assert parser.skipped_bytes == 4 and parser.buffered == 0


def test_bytes_without_any_page_are_dropped_as_they_come() -> None:
    parser = OggPageParser()
    assert parser.feed(b"z" * 1000) == []
    assert parser.buffered == 3 and parser.skipped_bytes == 997  # memory stays bounded


def test_garbage_before_and_between_pages_is_skipped_and_counted() -> None:
    a, b = page(0), page(1)
    parser = OggPageParser()
    pages = parser.feed(b"junk!" + a + b"\x00" * 10 + b)
    assert [p.raw for p in pages] == [a, b]
    assert parser.skipped_bytes == 15 and parser.corrupt_pages == 0


@pytest.mark.parametrize(
    ("what", "damage"),
    [
        ("version", lambda raw: edited(raw, 4, 1, fix_crc=True)),
        ("unknown flag bit", lambda raw: edited(raw, 5, 0x08, fix_crc=True)),
        ("checksum", lambda raw: edited(raw, len(raw) - 1, raw[-1] ^ 0x01)),
        ("crc field", lambda raw: edited(raw, 22, raw[22] ^ 0x80)),
        ("segment count", lambda raw: edited(raw, 26, 0)),
    ],
)
def test_a_damaged_page_is_dropped_and_the_next_one_found(what: str, damage) -> None:
    a, b, c = page(0), page(1, [b"second page"]), page(2)
    parser = OggPageParser()
    pages = parser.feed(a + damage(b) + c)
    assert [p.raw for p in pages] == [a, c], what
    assert parser.corrupt_pages == 1
    assert parser.skipped_bytes == len(b) and parser.buffered == 0


def test_an_incomplete_page_waits_for_the_rest() -> None:
    a = page(0, [b"x" * 500])
    parser = OggPageParser()
    assert parser.feed(a[:300]) == []
    assert parser.buffered == 300 and parser.corrupt_pages == 0
    assert [p.raw for p in parser.feed(a[300:])] == [a]


def test_an_incomplete_page_followed_by_a_valid_one_is_corrupt() -> None:
    # a truncated page (a lost network chunk) must not hold up the pages after it
    a, b = page(0, [b"x" * 500]), page(1)
    parser = OggPageParser()
    pages = parser.feed(a[:300] + b)
    assert [p.raw for p in pages] == [b]
    assert parser.corrupt_pages == 1 and parser.skipped_bytes == 300


def test_a_page_claiming_a_huge_length_does_not_stall_the_framer() -> None:
    # 255 segments of 255 bytes: ~64 KiB the parser would otherwise wait for
    a = bytearray(page(0))
    a[26] = 255
    b, c = page(1), page(2)
    parser = OggPageParser()
    pages = parser.feed(bytes(a) + b"\xff" * 255 + b + c)
    assert [p.raw for p in pages] == [b, c]
    assert parser.corrupt_pages == 1


def test_reset_drops_a_partial_page_but_keeps_the_counters() -> None:
    a = page(0)
    parser = OggPageParser()
    parser.feed(b"ab" + a[:20])
    parser.reset()
    assert parser.buffered == 0 and parser.skipped_bytes == 2
    assert [p.raw for p in parser.feed(a)] == [a]


@st.composite
def damaged_streams(draw) -> tuple[bytes, list[bytes]]:
    """Valid pages mixed with garbage, bit flips and truncated pages: (stream, its valid pages)."""
    data, valid = b"", []
    for i in range(draw(st.integers(1, 6))):
        # packet bytes without "O", so no capture pattern hides inside a damaged page's body
        body = draw(st.binary(min_size=1, max_size=300)).replace(b"O", b"o")
        raw = page(i, [body])
        kind = draw(st.sampled_from(["ok", "ok", "flip", "cut", "junk"]))
        if kind == "flip":
            pos = draw(st.integers(4, len(raw) - 1))
            raw = edited(raw, pos, raw[pos] ^ draw(st.integers(1, 255)))
        elif kind == "cut":
            raw = raw[: draw(st.integers(4, len(raw) - 1))]
        elif kind == "junk":
            data += draw(st.binary(max_size=40)).replace(b"O", b"o")
        if kind in ("ok", "junk"):
            valid.append(raw)
        data += raw
    return data, valid


@settings(max_examples=150, deadline=None)
@given(damaged_streams(), st.lists(st.integers(min_value=0, max_value=3000), max_size=8))
def test_damage_never_costs_a_valid_page_and_every_byte_is_accounted(stream_and_pages, cuts) -> None:
    data, valid = stream_and_pages
    parser = OggPageParser()
    pages = feed_in_pieces(parser, data, cuts)
    got = [p.raw for p in pages]
    assert got == valid  # damaged or truncated neighbours never cost a valid page
    assert parser.skipped_bytes + sum(map(len, got)) + parser.buffered == len(data)
    for p in pages:
        assert ogg_crc(p.raw[:22] + b"\0\0\0\0" + p.raw[26:]) == struct.unpack_from("<I", p.raw, 22)[0]


def test_split_pages_takes_whole_pages_apart() -> None:
    pages = [
        build_page(FLAG_BOS, 0, SERIAL, 0, [b"head"]),
        build_page(0, 960, SERIAL, 1, [b"a" * 300, b"b"]),
        build_page(FLAG_EOS, 960, SERIAL, 2, []),  # a page may hold no packet at all
    ]
    got = split_pages(b"".join(pages))
    assert [p.raw for p in got] == pages
    assert [(p.flags, p.granule, p.serial, p.sequence) for p in got] == [
        (FLAG_BOS, 0, SERIAL, 0),
        (0, 960, SERIAL, 1),
        (FLAG_EOS, 960, SERIAL, 2),
    ]
    assert split_pages(b"") == []


@pytest.mark.parametrize("cut", [1, HEADER_BYTES - 1, HEADER_BYTES + 1, -1])
def test_split_pages_refuses_what_is_not_whole_pages(cut: int) -> None:
    data = build_page(0, 0, SERIAL, 0, [b"x" * 10]) * 2
    with pytest.raises(ValueError):
        split_pages(data[: len(data) // 2 + cut] if cut > 0 else data[:cut])
    with pytest.raises(ValueError):
        split_pages(b"junk" + data)


def test_restamp_page_changes_serial_and_flags_with_a_valid_checksum() -> None:
    raw = build_page(0, 1920, SERIAL, 7, [b"packet"])
    new = restamp_page(raw, serial=0xDEADBEEF, flags=FLAG_EOS)
    (page,) = OggPageParser().feed(new)  # the parser checks the checksum
    assert (page.flags, page.granule, page.serial, page.sequence) == (FLAG_EOS, 1920, 0xDEADBEEF, 7)
    assert new == build_page(FLAG_EOS, 1920, 0xDEADBEEF, 7, [b"packet"])
    assert restamp_page(new, serial=SERIAL, flags=0) == raw
