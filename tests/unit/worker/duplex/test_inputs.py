"""Duplex input: chunk decoding, limits, reference audio, and merging chunks that piled up."""

from __future__ import annotations

import base64
import io
import wave

import numpy as np
import pytest

from omnivox.audio.pcm import float32_to_b64, pcm16_to_b64
from omnivox.core.errors import InvalidAudio, InvalidImage
from omnivox.protocol.duplex import AudioChunk
from omnivox.video.frames import encode_png
from omnivox.worker.duplex.inputs import Chunk, InputDecoder, InputLimits, decode_ref_audio, merge

LIMITS = InputLimits(max_chunk_ms=2000, max_frames=2, max_pixels=100 * 100)


def tone(n: int) -> np.ndarray:
    return (0.1 * np.sin(np.arange(n) / 5)).astype(np.float32)


def chunk_msg(audio: np.ndarray, **kw) -> AudioChunk:
    return AudioChunk(audio_base64=float32_to_b64(audio), **kw)


def test_float32_at_16_khz_passes_through_exactly() -> None:
    audio = tone(16000)
    assert np.array_equal(InputDecoder(16000, LIMITS, True).audio(chunk_msg(audio)), audio)


def test_pcm16_is_scaled_to_float() -> None:
    audio = tone(1600)
    msg = AudioChunk(audio_base64=pcm16_to_b64(audio), format="pcm16")
    got = InputDecoder(16000, LIMITS, True).audio(msg)
    assert np.abs(got - audio).max() < 1e-3


def test_the_duration_limit_is_in_the_client_s_rate() -> None:
    dec = InputDecoder(48000, LIMITS, True)
    dec.audio(chunk_msg(tone(96000)))  # 2 s at 48 kHz: at the limit
    with pytest.raises(InvalidAudio, match="limit is 2000 ms"):
        dec.audio(chunk_msg(tone(96001)))


def test_frames_keep_the_latest_and_only_check_headers_when_unseen() -> None:
    pngs = [base64.b64encode(encode_png(np.full((4, 4, 3), i, np.uint8))).decode() for i in range(3)]
    seen = InputDecoder(16000, LIMITS, True).frames(chunk_msg(tone(10), frame_base64_list=pngs))
    assert [int(f[0, 0, 0]) for f in seen] == [1, 2]
    blind = InputDecoder(16000, LIMITS, False)
    assert blind.frames(chunk_msg(tone(10), frame_base64_list=pngs)) == []
    with pytest.raises(InvalidImage):
        blind.frames(chunk_msg(tone(10), frame_base64_list=[base64.b64encode(b"BM....").decode()]))


def test_reference_audio_as_wav_or_raw_float32() -> None:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(24000)
        w.writeframes((tone(24000) * 32767).astype("<i2").tobytes())
    wav = decode_ref_audio(base64.b64encode(buf.getvalue()).decode(), 16000)
    assert abs(len(wav) - 16000) <= 1
    raw = decode_ref_audio(float32_to_b64(tone(8000)), 16000)
    assert len(raw) == 8000
    with pytest.raises(InvalidAudio):
        decode_ref_audio("", 16000)


def test_one_chunk_is_not_copied() -> None:
    c = Chunk(tone(100))
    assert merge([c], 1000) == (c, 0)


def test_merged_chunks_hear_everything_see_the_latest_frames_and_keep_the_first_arrival() -> None:
    frame = np.zeros((2, 2, 3), np.uint8)
    a = Chunk(tone(100), arrived=1.0)
    b = Chunk(tone(100), frames=[frame], force_listen=True, arrived=2.0)
    c = Chunk(tone(100), arrived=3.0)
    one, dropped = merge([a, b, c], 1000)
    assert len(one.audio) == 300 and one.frames == [frame] and one.force_listen
    assert one.arrived == 1.0 and one.merged == 3 and dropped == 0


def test_audio_past_the_bound_is_dropped_oldest_first() -> None:
    a, b = Chunk(np.zeros(100, np.float32)), Chunk(np.ones(100, np.float32))
    one, dropped = merge([a, b], 150)
    assert dropped == 50 and len(one.audio) == 150 and one.audio[:50].sum() == 0 and one.audio[50:].min() == 1
