"""Realtime audio on the wire: input decoders and output encoders for every format."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from omnivox.audio.g711 import alaw_encode, ulaw_decode
from omnivox.audio.pcm import to_pcm16
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
