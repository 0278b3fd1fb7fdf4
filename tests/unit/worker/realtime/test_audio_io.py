"""Realtime audio on the wire: input decoders and output encoders for every format."""

from __future__ import annotations

import base64
import gc
import weakref

import numpy as np
import pytest

from omnivox.audio.g711 import alaw_encode, ulaw_decode
from omnivox.audio.pcm import from_pcm16, to_pcm16
from omnivox.audio.resample import StreamResampler
from omnivox.core.errors import InvalidAudio
from omnivox.protocol.realtime.session_config import AudioFormat
from omnivox.worker.realtime.audio_io import InputDecoder, OutputEncoder


def test_audio_codecs_on_the_wire() -> None:
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(2400) / 24000)).astype(np.float32)
    pcm = InputDecoder(AudioFormat(type="audio/pcm", rate=24000), 16000)
    out = np.concatenate([pcm.decode(base64.b64encode(to_pcm16(tone)).decode()) for _ in range(5)])
    assert 7000 < len(out) <= 8000  # 0.5 s at 16 kHz, less the resampler's held-back tail
    alaw = InputDecoder(AudioFormat(type="audio/pcma"), 16000)
    assert alaw.format.rate == 8000
    assert len(alaw.decode(base64.b64encode(alaw_encode(np.tile(tone, 2))).decode())) > 0
    with pytest.raises(InvalidAudio):
        pcm.decode("@@@")
    opus_in = InputDecoder(AudioFormat(type="audio/opus"), 16000)
    assert len(opus_in.decode(base64.b64encode(b"junk before the first page").decode())) == 0  # joined late
    with pytest.raises(InvalidAudio):
        opus_in.decode(base64.b64encode(b"not ogg at all" * 2000).decode())

    ulaw = OutputEncoder(AudioFormat(type="audio/pcmu"))
    wire = base64.b64decode(ulaw.encode(tone)) + base64.b64decode(ulaw.flush())
    assert len(wire) == 800  # 100 ms at 8 kHz, one byte per sample
    back = ulaw_decode(wire)
    assert abs(float(np.sqrt(np.mean(back[100:-100] ** 2))) - 0.3 / np.sqrt(2)) < 0.03
    opus = OutputEncoder(AudioFormat(type="audio/opus"))
    first = base64.b64decode(opus.encode(np.tile(tone, 5)))
    assert first.startswith(b"OggS")  # a fresh Ogg stream, headers first


def _speechlike(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 24000
    return (0.3 * np.sin(2 * np.pi * 220 * t) + 0.05 * rng.standard_normal(n)).astype(np.float32)


def _b64(pcm: bytes) -> str:
    return base64.b64encode(pcm).decode()


# odd sizes: one sample, a prime count, empty, a long chunk then short ones (the scratch is reused)
CUTS = [1, 7, 0, 961, 4800, 3, 480, 959, 2]


def test_pcm16_chunks_decode_to_the_samples_of_the_checked_path() -> None:
    pcm = to_pcm16(_speechlike(sum(CUTS)))
    fast = InputDecoder(AudioFormat(type="audio/pcm", rate=24000), 16000)
    checked = StreamResampler(24000, 16000)  # the path every chunk took before: checked, copied
    at = 0
    for n in CUTS:
        piece = pcm[2 * at : 2 * (at + n)]
        at += n
        got = fast.decode(_b64(piece))
        want = checked.process(from_pcm16(piece))
        assert got.dtype == np.float32 and np.array_equal(got, want)  # sample-identical


def test_a_chunked_pcm16_stream_is_continuous_across_chunk_edges() -> None:
    pcm = to_pcm16(_speechlike(sum(CUTS), seed=1))
    whole = InputDecoder(AudioFormat(type="audio/pcm", rate=24000), 16000)
    chunked = InputDecoder(AudioFormat(type="audio/pcm", rate=24000), 16000)
    at, outs = 0, []
    for n in CUTS:
        outs.append(chunked.decode(_b64(pcm[2 * at : 2 * (at + n)])))
        at += n
    one = whole.decode(_b64(pcm))
    out = np.concatenate(outs)
    # the same stream whatever the chunking: up to what each has released so far (soxr holds back
    # its filter delay), equal to float rounding; no click or gap at any edge
    n = min(len(one), len(out))
    assert n > 4000  # of the 5475 samples at 16 kHz: at most soxr's delay (under 1100) held back
    np.testing.assert_allclose(out[:n], one[:n], atol=1e-6)


def test_a_decoded_chunk_is_not_overwritten_by_the_next() -> None:
    for rate in (24000, 16000):  # resampled, and passed through at the target rate
        dec = InputDecoder(AudioFormat(type="audio/pcm", rate=rate), 16000)
        first = dec.decode(_b64(to_pcm16(np.full(4800, 0.25, np.float32))))
        kept = first.copy()
        dec.decode(_b64(to_pcm16(np.full(4800, -0.5, np.float32))))
        assert np.array_equal(first, kept)


def test_pcm16_at_the_target_rate_passes_through_unchanged() -> None:
    samples = _speechlike(333)
    dec = InputDecoder(AudioFormat(type="audio/pcm", rate=16000), 16000)
    assert np.array_equal(dec.decode(_b64(to_pcm16(samples))), from_pcm16(to_pcm16(samples)))


@pytest.mark.parametrize("bad", ["@@@", "AAA", "AA==AA==", "AAE=\n", "AQ=="])
def test_bad_pcm16_appends_are_invalid_audio_and_the_stream_goes_on(bad: str) -> None:
    dec = InputDecoder(AudioFormat(type="audio/pcm", rate=24000), 16000)
    dec.decode(_b64(to_pcm16(_speechlike(960))))
    with pytest.raises(InvalidAudio):
        dec.decode(bad)  # not strict base64, or ("AQ==") one byte: half a PCM16 sample
    assert len(dec.decode(_b64(to_pcm16(_speechlike(960))))) > 0


def test_a_dropped_decoder_frees_its_resampler() -> None:
    dec = InputDecoder(AudioFormat(type="audio/pcm", rate=24000), 16000)
    dec.decode(_b64(to_pcm16(_speechlike(960))))
    resampler = weakref.ref(dec._resampler)
    del dec
    gc.collect()
    assert resampler() is None


def test_pcm16_out_at_the_tts_rate_is_the_samples_as_pcm16_and_bad_samples_are_refused() -> None:
    enc = OutputEncoder(AudioFormat(type="audio/pcm", rate=24000))
    tone = _speechlike(1234)
    assert base64.b64decode(enc.encode(tone)) == to_pcm16(tone)
    assert base64.b64decode(enc.encode(tone[:7])) == to_pcm16(tone[:7])
    assert enc.flush() == ""  # nothing held back at the same rate
    with pytest.raises(InvalidAudio):
        enc.encode(np.array([0.1, np.nan], np.float32))


@pytest.mark.parametrize("fmt", ["audio/pcmu", "audio/pcma"])
def test_a_phone_line_s_audio_is_heard_4_ms_behind(fmt: str) -> None:
    """G.711 goes to 16 kHz through the half-band interpolator: each 40 ms chunk comes out whole
    but for the same 4 ms (soxr's blocks held back up to 115 ms: a barge-in heard that late)."""
    from omnivox.audio.g711 import ulaw_encode

    encode = ulaw_encode if fmt == "audio/pcmu" else alaw_encode
    line = InputDecoder(AudioFormat(type=fmt), 16000)
    speech = _speechlike(8000)[::3]  # 1/3 s at 8 kHz
    fed = given = 0
    for at in range(0, len(speech), 320):
        piece = speech[at : at + 320]
        fed += len(piece)
        given += len(line.decode(_b64(encode(piece))))
        assert 2 * fed - given == 64  # 4 ms at 16 kHz
