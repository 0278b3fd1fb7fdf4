"""Audio placement on the session's clock, and decoding every wire encoding."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.audio.g711 import ulaw_encode
from omnivox.audio.opus import encode_opus
from omnivox.audio.pcm import to_float32_bytes, to_pcm16
from omnivox.audio.wav import write_wav
from omnivox.protocol.timelines.reader import Audio
from omnivox.recording.tracks import Track, voiced_spans


def pcm(seconds: float, rate: int = 16000, level: float = 0.1) -> bytes:
    return to_pcm16(np.full(int(seconds * rate), level, np.float32))


def piece(role: str, seconds: float, rate: int = 16000, **kw) -> Audio:
    return Audio(role, pcm(seconds, rate), "pcm16", rate, **kw)


def test_live_user_audio_ends_where_it_arrived_and_bunched_pieces_follow_each_other():
    track = Track("user", chunk_s=10)
    assert track.add(1.0, piece("user", 0.5)) == []  # buffered
    track.add(1.5, piece("user", 0.5))  # contiguous: joined
    track.add(1.51, piece("user", 0.5))  # arrived bunched: still after the one before
    (chunk,) = track.flush()
    assert chunk.start == pytest.approx(0.5) and chunk.duration == pytest.approx(1.5)
    assert chunk.t == 1.0 and chunk.stream_pos == 0.0
    track.add(5.0, piece("user", 0.5))  # after a pause in the stream: a new chunk where it belongs
    (later,) = track.flush()
    assert later.start == pytest.approx(4.5) and later.stream_pos == pytest.approx(1.5)


def test_assistant_audio_plays_after_what_is_queued_and_a_cut_drops_the_rest():
    track = Track("assistant", chunk_s=10)
    track.add(2.0, piece("assistant", 1.0, 24000))
    track.add(2.1, piece("assistant", 1.0, 24000))  # sent ahead of real time: queued behind
    assert track.cursor == pytest.approx(4.0)
    (chunk,) = track.cut(2.5)  # the user talked over it at 2.5
    assert (chunk.start, chunk.duration) == (2.0, 2.0)
    track.add(3.0, piece("assistant", 0.5, 24000))  # the next reply starts when it comes
    (after,) = track.flush()
    assert after.start == pytest.approx(3.0) and after.stream_pos is None


def test_a_clip_ended_when_it_arrived_and_pieces_are_joined_into_second_long_chunks():
    track = Track("user")
    (clip,) = track.add(3.0, piece("user", 2.0, clip=True))
    assert (clip.start, clip.duration) == (1.0, 2.0)
    chunks = []
    for i in range(25):  # a microphone sending 40 ms at a time
        chunks += track.add(5.0 + 0.04 * (i + 1), piece("user", 0.04))
    chunks += track.flush()
    assert [round(c.duration, 2) for c in chunks] == [1.0]
    # a new rate cannot share a chunk
    track.add(7.0, piece("user", 0.1))
    assert len(track.add(7.1, piece("user", 0.1, rate=24000))) == 1


@pytest.mark.parametrize("encoding", ["pcm16", "float32", "wav", "pcmu", "ogg_opus"])
def test_every_wire_encoding_decodes(encoding):
    tone = (0.3 * np.sin(2 * np.pi * 300 * np.arange(24000) / 24000)).astype(np.float32)
    data, rate = {
        "pcm16": (to_pcm16(tone), 24000),
        "float32": (to_float32_bytes(tone), 24000),
        "wav": (write_wav(tone, 24000), 0),
        "pcmu": (ulaw_encode(tone[::3]), 8000),
        "ogg_opus": (encode_opus(tone, 24000), 24000),
    }[encoding]
    track = Track("assistant")
    samples, got_rate = track.decode(Audio("assistant", data, encoding, rate))
    assert got_rate == (8000 if encoding == "pcmu" else 24000)
    assert len(samples) / got_rate == pytest.approx(1.0, abs=0.03)
    assert np.sqrt(np.mean(samples**2)) == pytest.approx(0.3 / np.sqrt(2), rel=0.15)


def test_what_cannot_be_decoded_is_not_placed():
    track = Track("user")
    assert track.add(1.0, Audio("user", b"\x00\x00\xc0\x7f", "float32", 16000)) == []  # NaN
    assert track.add(1.0, Audio("user", b"RIFFjunk", "wav", 16000)) == []
    assert track.add(1.0, Audio("user", b"", "pcm16", 16000)) == []
    assert track.flush() == [] and track.cursor == 0.0


def test_voiced_spans_find_the_loud_stretches():
    audio = np.zeros(16000, np.float32)
    audio[4800:9600] = 0.2
    assert voiced_spans(audio, 16000) == [(0.3, 0.6)]
    assert voiced_spans(np.zeros(100, np.float32), 16000) == []
