"""Duplex input edge cases: what an ``audio_chunk`` may not carry, the resampler kept across chunks,
and merging at the lag bound."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from omnivox.audio.pcm import float32_to_b64, pcm16_to_b64
from omnivox.core.errors import InvalidAudio
from omnivox.protocol.duplex import AudioChunk
from omnivox.worker.duplex.inputs import Chunk, InputDecoder, InputLimits, decode_ref_audio, merge

LIMITS = InputLimits(max_chunk_ms=1000, max_frames=2, max_pixels=64 * 64)


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def decoder(rate: int = 16000, see: bool = True) -> InputDecoder:
    return InputDecoder(rate, LIMITS, see)


def test_empty_audio_is_refused():
    with pytest.raises(InvalidAudio, match="no audio"):
        decoder().audio(AudioChunk(audio_base64=""))
    with pytest.raises(InvalidAudio, match="no audio"):
        decoder().audio(AudioChunk(audio_base64="", format="pcm16"))


def test_bad_base64_is_refused():
    with pytest.raises(InvalidAudio, match="base64"):
        decoder().audio(AudioChunk(audio_base64="not base64!!"))


def test_float32_needs_whole_samples():
    with pytest.raises(InvalidAudio, match="multiple of 4"):
        decoder().audio(AudioChunk(audio_base64=b64(b"\x00" * 6)))


def test_pcm16_needs_whole_samples():
    with pytest.raises(InvalidAudio, match="even number"):
        decoder().audio(AudioChunk(audio_base64=b64(b"\x00" * 3), format="pcm16"))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_float32_is_refused(bad):
    audio = np.zeros(16, np.float32)
    audio[3] = bad
    with pytest.raises(InvalidAudio, match="NaN or infinite"):
        decoder().audio(AudioChunk(audio_base64=float32_to_b64(audio)))


def test_float32_keeps_its_headroom():
    audio = np.array([1.5, -2.0, 0.25], np.float32)
    np.testing.assert_array_equal(decoder().audio(AudioChunk(audio_base64=float32_to_b64(audio))), audio)


def test_the_limit_at_16_khz():
    d = decoder()
    assert len(d.audio(AudioChunk(audio_base64=float32_to_b64(np.zeros(16000, np.float32))))) == 16000
    with pytest.raises(InvalidAudio) as err:
        d.audio(AudioChunk(audio_base64=float32_to_b64(np.zeros(16001, np.float32))))
    assert err.value.details["limit_ms"] == 1000


def test_the_limit_applies_to_pcm16_too():
    with pytest.raises(InvalidAudio, match="limit is 1000 ms"):
        decoder(8000).audio(AudioChunk(audio_base64=pcm16_to_b64(np.zeros(8001, np.float32)), format="pcm16"))


def test_16_khz_has_no_resampler_and_other_rates_do():
    assert decoder(16000)._resampler is None
    assert decoder(8000)._resampler is not None
    assert decoder(48000)._resampler is not None


def test_resampled_chunks_add_up_to_the_right_length():
    d = decoder(8000)
    audio = (0.1 * np.sin(np.arange(8000) / 3)).astype(np.float32)
    got = [d.audio(AudioChunk(audio_base64=float32_to_b64(audio[i : i + 800]))) for i in range(0, 8000, 800)]
    total = sum(len(g) for g in got)
    # the resampler holds back its filter delay (milliseconds) until later audio comes
    assert 14000 < total <= 16000
    assert all(g.dtype == np.float32 for g in got)


def test_no_frames_gives_no_frames():
    msg = AudioChunk(audio_base64=float32_to_b64(np.zeros(4, np.float32)))
    assert decoder().frames(msg) == []
    assert decoder(see=False).frames(msg) == []
    msg = AudioChunk(audio_base64=float32_to_b64(np.zeros(4, np.float32)), frame_base64_list=[])
    assert decoder().frames(msg) == []


def test_reference_audio_that_is_empty_is_refused():
    with pytest.raises(InvalidAudio):
        decode_ref_audio("", 16000)


def test_raw_reference_audio_at_16_khz_is_kept():
    audio = np.linspace(-0.5, 0.5, 320).astype(np.float32)
    got = decode_ref_audio(float32_to_b64(audio), 16000)
    np.testing.assert_allclose(got, audio, atol=1e-6)


# ---- merge


def chunk(n: int, value: float = 0.0, **kw) -> Chunk:
    return Chunk(audio=np.full(n, value, np.float32), **kw)


def test_a_single_chunk_within_the_bound_is_returned_as_is():
    c = chunk(10)
    one, dropped = merge([c], 10)
    assert one is c and dropped == 0


def test_a_single_chunk_over_the_bound_is_trimmed_to_its_newest_audio():
    c = Chunk(audio=np.arange(10, dtype=np.float32), arrived=5.0)
    one, dropped = merge([c], 4)
    assert dropped == 6
    np.testing.assert_array_equal(one.audio, [6, 7, 8, 9])
    assert one.merged == 1 and one.arrived == 5.0
    assert one is not c


def test_merged_counts_add_up():
    a, b = chunk(2, merged=3), chunk(2, merged=2)
    one, _ = merge([a, b], 100)
    assert one.merged == 5


def test_force_listen_if_any_asked():
    one, _ = merge([chunk(1), chunk(1, force_listen=True), chunk(1)], 100)
    assert one.force_listen
    one, _ = merge([chunk(1), chunk(1)], 100)
    assert not one.force_listen


def test_no_frames_anywhere_gives_none():
    one, _ = merge([chunk(1), chunk(1)], 100)
    assert one.frames == []


def test_the_latest_chunk_with_frames_wins_even_if_older():
    f1, f2 = np.zeros((2, 2, 3), np.uint8), np.ones((2, 2, 3), np.uint8)
    one, _ = merge([chunk(1, frames=[f1]), chunk(1, frames=[f2]), chunk(1)], 100)
    assert len(one.frames) == 1 and one.frames[0] is f2


def test_merged_audio_is_in_arrival_order():
    one, dropped = merge([chunk(2, 1.0), chunk(3, 2.0)], 100)
    np.testing.assert_array_equal(one.audio, [1, 1, 2, 2, 2])
    assert dropped == 0


def test_merged_audio_drops_across_chunks_oldest_first():
    one, dropped = merge([chunk(3, 1.0), chunk(3, 2.0), chunk(3, 3.0)], 4)
    assert dropped == 5
    np.testing.assert_array_equal(one.audio, [2, 3, 3, 3])


def test_a_bound_of_zero_drops_everything():
    one, dropped = merge([chunk(3), chunk(2)], 0)
    assert dropped == 5 and len(one.audio) == 0


def test_a_chunk_defaults():
    c = chunk(1)
    assert c.frames == [] and not c.force_listen and c.merged == 1 and c.arrived > 0
    assert chunk(1).frames is not c.frames
