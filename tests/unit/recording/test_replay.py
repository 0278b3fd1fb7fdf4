"""The merged replay puts every chunk at its place, on its side, only as long as it was heard."""

from __future__ import annotations

import io
import wave

import av
import numpy as np
import pytest

from omnivox.audio.wav import write_wav_file
from omnivox.recording import replay
from omnivox.recording.replay import build_mp4, build_wav
from omnivox.video.frames import encode_jpeg, encode_png

RATE = 24000


def tone(seconds: float, rate: int, freq: float = 300.0, level: float = 0.5) -> np.ndarray:
    return (level * np.sin(2 * np.pi * freq * np.arange(int(seconds * rate)) / rate)).astype(np.float32)


def read(path):
    with wave.open(str(path)) as w:
        assert (w.getnchannels(), w.getframerate()) == (2, RATE)
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2").reshape(-1, 2) / 32768
    return pcm[:, 0], pcm[:, 1]


def level(x, a, b):
    part = x[int(a * RATE) : int(b * RATE)]
    return float(np.sqrt(np.mean(part**2))) if len(part) else 0.0


def clip(tmp_path, name, role, start, seconds, rate, end=None):
    (tmp_path / name).parent.mkdir(exist_ok=True)
    write_wav_file(tmp_path / name, tone(seconds, rate), rate)
    return {"file": name, "role": role, "start": start, "duration": seconds, "end": end or start + seconds}


def test_both_voices_at_their_places_across_window_boundaries(tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "_WINDOW_S", 0.7)  # many windows: chunks straddle their edges
    clips = [
        clip(tmp_path, "user_audio/1.wav", "user", 0.5, 1.0, 16000),
        clip(tmp_path, "ai_audio/1.wav", "assistant", 1.2, 1.0, 24000, end=1.6),  # cut at 1.6
        clip(tmp_path, "ai_audio/2.wav", "assistant", 2.5, 0.5, 48000),
        {"file": "ai_audio/missing.wav", "role": "assistant", "start": 3.0, "duration": 1.0, "end": 4.0},
    ]
    duration = build_wav(tmp_path, clips, tmp_path / "out.wav")
    assert duration == pytest.approx(4.0)
    left, right = read(tmp_path / "out.wav")
    assert len(left) == 4 * RATE
    assert level(left, 0.55, 1.45) == pytest.approx(0.5 / np.sqrt(2), rel=0.05)
    assert level(left, 0, 0.45) == 0 and level(left, 1.55, 4) == 0
    assert level(right, 1.25, 1.55) > 0.3 and level(right, 1.65, 2.45) == 0  # heard until the cut
    assert level(right, 2.55, 2.95) > 0.3 and level(right, 3.0, 4.0) == 0  # an unreadable chunk: silence
    assert level(right, 0, 1.15) == 0 and not (tmp_path / "out.wav.tmp").exists()


def test_overlapping_speech_is_mixed_not_replaced(tmp_path):
    clips = [
        clip(tmp_path, "a/1.wav", "assistant", 0.0, 1.0, RATE),
        clip(tmp_path, "a/2.wav", "assistant", 0.5, 1.0, RATE),
    ]
    build_wav(tmp_path, clips, tmp_path / "out.wav")
    _, right = read(tmp_path / "out.wav")
    assert level(right, 0.6, 0.9) > level(right, 0.1, 0.4) * 1.8  # both at once: louder (same phase)


def test_the_video_replay_shows_each_frame_from_when_it_came(tmp_path):
    clips = [clip(tmp_path, "user_audio/1.wav", "user", 0.0, 3.0, 16000)]
    build_wav(tmp_path, clips, tmp_path / "m.wav")
    (tmp_path / "user_frames").mkdir()
    colours = [(250, 0, 0), (0, 250, 0), (0, 0, 250)]
    frames = []
    for i, colour in enumerate(colours):
        image = np.full((50, 70, 3), colour, np.uint8)  # odd sizes: made even for H.264
        data = encode_png(image) if i == 1 else encode_jpeg(image)
        name = f"user_frames/{i}.{'png' if i == 1 else 'jpg'}"
        (tmp_path / name).write_bytes(data)
        frames.append({"t": 0.4 + i, "file": name})
    frames.append({"t": 2.9, "file": "user_frames/broken.jpg"})
    (tmp_path / "user_frames/broken.jpg").write_bytes(b"\xff\xd8 not really")
    assert build_mp4(tmp_path, frames, tmp_path / "m.wav", tmp_path / "m.mp4", 3.0)
    data = (tmp_path / "m.mp4").read_bytes()
    with av.open(io.BytesIO(data)) as video:
        assert video.duration / 1e6 == pytest.approx(3.0, abs=0.1)
        shown = [
            (float(f.time), f.to_ndarray(format="rgb24").reshape(-1, 3).mean(axis=0))
            for f in video.decode(video=0)
        ]
    with av.open(io.BytesIO(data)) as video:
        sound = sum(f.samples for f in video.decode(audio=0))
    assert sound / RATE == pytest.approx(3.0, abs=0.1)
    for at, colour in ((0.0, colours[0]), (1.4, colours[1]), (2.4, colours[2]), (3.0, colours[2])):
        frame = next(c for t, c in reversed(shown) if t <= at + 1e-3)
        assert np.abs(frame - colour).max() < 30, (at, frame)
    assert not build_mp4(
        tmp_path, [{"t": 0.0, "file": "user_frames/broken.jpg"}], tmp_path / "m.wav", tmp_path / "x.mp4", 3.0
    )


def test_when_the_first_frame_is_unreadable_the_first_readable_one_shows_from_the_start(tmp_path):
    build_wav(tmp_path, [clip(tmp_path, "user_audio/1.wav", "user", 0.0, 2.0, 16000)], tmp_path / "m.wav")
    (tmp_path / "user_frames").mkdir()
    (tmp_path / "user_frames/0.jpg").write_bytes(b"\xff\xd8 cut short by a full disk")
    (tmp_path / "user_frames/1.jpg").write_bytes(encode_jpeg(np.full((48, 64, 3), (0, 250, 0), np.uint8)))
    frames = [{"t": 0.2, "file": "user_frames/0.jpg"}, {"t": 1.0, "file": "user_frames/1.jpg"}]
    assert build_mp4(tmp_path, frames, tmp_path / "m.wav", tmp_path / "m.mp4", 2.0)
    with av.open(str(tmp_path / "m.mp4")) as video:
        first = next(iter(video.decode(video=0)))
        assert float(first.time) == pytest.approx(0.0, abs=1e-3)  # no black second before it
        assert np.abs(first.to_ndarray(format="rgb24").reshape(-1, 3).mean(axis=0) - (0, 250, 0)).max() < 30
