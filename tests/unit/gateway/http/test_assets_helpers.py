"""Reference audio without HTTP: display names, file names, what an upload decodes to, and the
store's limits and files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from omnivox.audio.wav import read_wav, write_wav
from omnivox.core.config import Settings
from omnivox.core.errors import InvalidAudio, MessageTooLarge, NotFound
from omnivox.gateway.http.assets import (
    STORED_RATE,
    RefAudioLimits,
    RefAudioStore,
    _clean_name,
    _filename_stem,
    decode_upload,
)


def tone(seconds: float, rate: int = STORED_RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


@pytest.fixture
def store(tmp_path):
    return RefAudioStore(tmp_path / "ref_audio", RefAudioLimits(max_bytes=200_000, min_s=0.5, max_s=2.0))


# ---- names


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (None, ""),
        ("", ""),
        ("  my voice  ", "my voice"),
        ("a\x00b\nc\td", "abcd"),
        ("\u200bzero width", "zero width"),
        ("x" * 150, "x" * 100),
        ("y" * 99 + " z", "y" * 99),  # cut at 100, then trimmed again
        ("caf\u00e9 \u00e0 Paris", "caf\u00e9 \u00e0 Paris"),
    ],
)
def test_clean_name(raw, clean):
    assert _clean_name(raw) == clean


@pytest.mark.parametrize(
    ("filename", "stem"),
    [
        (None, ""),
        ("", ""),
        ("voice.wav", "voice"),
        ("C:\\Users\\me\\clips\\hello.ogg", "hello"),
        ("/home/me/take 2.wav", "take 2"),
        ("archive.tar.gz", "archive.tar"),
        ("noext", "noext"),
    ],
)
def test_filename_stem(filename, stem):
    assert _filename_stem(filename) == stem


# ---- decoding


def test_a_24k_wav_decodes_as_it_is():
    audio = tone(0.5)
    decoded = decode_upload(write_wav(audio, STORED_RATE))
    assert decoded.dtype == np.float32 and len(decoded) == len(audio)
    assert np.max(np.abs(decoded - audio)) < 1e-3


def test_a_16k_wav_is_resampled_to_24k():
    decoded = decode_upload(write_wav(tone(0.5, 16000), 16000))
    assert abs(len(decoded) - STORED_RATE // 2) <= 2


@pytest.mark.parametrize("data", [b"", b"hello world", b"RIFF\x00\x00\x00\x00AVI LIST", b"ID3\x03mp3"])
def test_anything_else_is_not_audio(data):
    with pytest.raises(InvalidAudio):
        decode_upload(data)


def test_a_truncated_wav_is_not_audio():
    with pytest.raises(InvalidAudio):
        decode_upload(write_wav(tone(0.1), STORED_RATE)[:30])


# ---- the store


def test_limits_from_settings():
    limits = RefAudioLimits.from_settings(
        Settings(
            ref_audio_max_bytes=4096,
            ref_audio_min_s=0.2,
            ref_audio_max_s=5,
            ref_audio_max_clips=7,
            ref_audio_max_total_mb=3,
            ref_audio_max_clips_per_client=2,
            ref_audio_max_mb_per_client=1,
            ref_audio_min_free_mb=9,
        )
    )
    assert limits == RefAudioLimits(4096, 0.2, 5.0, 7, 3 * 2**20, 2, 2**20, 9 * 2**20)


def test_store_under_the_data_dir(tmp_path):
    s = RefAudioStore.from_settings(Settings(data_dir=tmp_path))
    assert s.root == tmp_path / "ref_audio"


def test_add_stores_a_24k_wav_and_metadata(store):
    ref = store.add(write_wav(tone(1.0, 16000), 16000), "  Greeting\n")
    assert ref.name == "Greeting" and ref.sample_rate == STORED_RATE and ref.duration_s == 1.0
    audio, rate = read_wav(store.read_audio(ref.id))
    assert rate == STORED_RATE and len(audio) == STORED_RATE
    assert ref.bytes == len(store.read_audio(ref.id))
    assert json.loads((store.root / f"{ref.id}.json").read_text())["name"] == "Greeting"
    assert store.get(ref.id) == ref and store.entries() == [ref]
    assert not list(store.root.glob("*.tmp"))


def test_a_nameless_clip_is_named_by_its_id(store):
    ref = store.add(write_wav(tone(1.0), STORED_RATE), None)
    assert ref.name == ref.id


def test_clips_too_short_or_too_long_are_refused_and_nothing_is_kept(store):
    with pytest.raises(InvalidAudio, match="at least"):
        store.add(write_wav(tone(0.25), STORED_RATE))
    with pytest.raises(InvalidAudio, match="at most"):
        store.add(write_wav(tone(3.0, 8000), 8000))
    assert store.entries() == []


def test_a_file_over_the_byte_limit_is_refused_before_decoding(store):
    with pytest.raises(MessageTooLarge):
        store.add(b"\x00" * 200_001)


def test_delete_removes_both_files_and_twice_is_not_found(store):
    ref = store.add(write_wav(tone(1.0), STORED_RATE))
    store.delete(ref.id)
    assert list(store.root.iterdir()) == [] and store.entries() == []
    with pytest.raises(NotFound):
        store.delete(ref.id)
    with pytest.raises(NotFound):
        store.read_audio(ref.id)


def test_an_entry_whose_wav_vanished_cannot_be_read(store):
    ref = store.add(write_wav(tone(1.0), STORED_RATE))
    (store.root / f"{ref.id}.wav").unlink()
    assert store.get(ref.id) == ref
    with pytest.raises(NotFound):
        store.read_audio(ref.id)


def test_an_orphan_wav_is_not_listed(store):
    store.root.mkdir(parents=True)
    (store.root / "ref_0123456789abcdef.wav").write_bytes(write_wav(tone(1.0), STORED_RATE))
    assert store.entries() == []
