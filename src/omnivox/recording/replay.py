"""The merged replay: both speakers on the session's clock, as the conversation sounded.

``merged_replay.wav`` is stereo 16-bit PCM at 24 kHz: the user on the left, the assistant on the
right, each chunk at its place (overlaps and barge-ins included; an assistant chunk cut by a
barge-in plays only up to the cut). Second 0 of the file is the start of the session, so a player's
position is a time on the timeline. It is written a window at a time: a long session never needs
its whole audio in memory.

``merged_replay.mp4`` (omni sessions) shows each camera frame from the moment it arrived until the
next, with the merged audio: H.264 and AAC, which browsers play, through PyAV's own FFmpeg.
"""

from __future__ import annotations

import wave
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from omnivox.audio.pcm import to_pcm16
from omnivox.audio.resample import resample
from omnivox.audio.wav import read_wav

RATE = 24000
_WINDOW_S = 10.0
_MAX_VIDEO_WIDTH = 640


def build_wav(directory: Path, clips: list[dict[str, Any]], out: Path) -> float:
    """Mix ``clips`` (audio timeline entries with ``end``) into ``out``; returns its duration."""
    placed = sorted((c for c in clips if c["end"] > c["start"]), key=lambda c: (c["start"], c["role"]))
    total = max((c["end"] for c in placed), default=0.0)
    frames = int(np.ceil(total * RATE))
    tmp = out.with_name(out.name + ".tmp")
    window = int(_WINDOW_S * RATE)
    cache: dict[str, np.ndarray] = {}
    nxt = 0  # the first clip not yet read
    active: list[dict[str, Any]] = []
    with wave.open(str(tmp), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(RATE)
        for begin in range(0, frames, window):
            end = min(frames, begin + window)
            mix = np.zeros((end - begin, 2), np.float32)
            while nxt < len(placed) and placed[nxt]["start"] * RATE < end:
                active.append(placed[nxt])
                nxt += 1
            for clip in active:
                samples = cache.get(clip["file"])
                if samples is None:
                    samples = cache[clip["file"]] = _load(directory, clip)
                at = round(clip["start"] * RATE)
                lo, hi = max(at, begin), min(at + len(samples), end)
                if hi > lo:
                    mix[lo - begin : hi - begin, 0 if clip["role"] == "user" else 1] += samples[
                        lo - at : hi - at
                    ]
            still = []
            for clip in active:
                if round(clip["start"] * RATE) + len(cache[clip["file"]]) > end:
                    still.append(clip)
                else:
                    cache.pop(clip["file"], None)
            active = still
            w.writeframes(to_pcm16(np.clip(mix, -1.0, 1.0).reshape(-1)))
    tmp.replace(out)
    return frames / RATE


def _load(directory: Path, clip: dict[str, Any]) -> np.ndarray:
    """A chunk at the replay's rate, only as long as it was heard."""
    try:
        audio, rate = read_wav(directory / clip["file"])
        audio = resample(audio, rate, RATE)
    except Exception:  # a chunk that cannot be read is silence, not a lost replay
        return np.zeros(0, np.float32)
    heard = round((clip["end"] - clip["start"]) * RATE)
    return audio[:heard]


def build_mp4(directory: Path, frames: list[dict[str, Any]], wav: Path, out: Path, duration: float) -> bool:
    """The camera frames (timeline entries ``{t, file}``) with the merged audio; False if no frame
    could be read."""
    import av  # PyAV: only the sessions with video need it

    images = _frames(directory, frames)
    if not images:
        return False
    width, height = _size(images[0][1])
    tmp = out.with_name(out.name + ".tmp.mp4")
    with av.open(str(tmp), "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=30)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.codec_context.time_base = Fraction(1, 1000)
        video.options = {"preset": "veryfast", "crf": "28"}
        audio = container.add_stream("aac", rate=RATE, layout="stereo")
        last_ms = -1
        for t, image in images:
            frame = av.VideoFrame.from_image(image.convert("RGB").resize((width, height)))
            ms = max(last_ms + 1, int(t * 1000))
            frame.pts, frame.time_base, last_ms = ms, Fraction(1, 1000), ms
            container.mux(video.encode(frame))
        # the last picture stays until the sound ends
        end_ms = int(duration * 1000)
        if end_ms > last_ms + 1:
            frame = av.VideoFrame.from_image(images[-1][1].convert("RGB").resize((width, height)))
            frame.pts, frame.time_base = end_ms, Fraction(1, 1000)
            container.mux(video.encode(frame))
        container.mux(video.encode())
        _mux_audio(container, audio, wav)
    tmp.replace(out)
    return True


def _frames(directory: Path, frames: list[dict[str, Any]]) -> list[tuple[float, Any]]:
    from PIL import Image

    images: list[tuple[float, Any]] = []
    for entry in sorted(frames, key=lambda f: f["t"]):
        try:
            image = Image.open(directory / entry["file"])
            image.load()
        except Exception:
            continue
        # the first picture that can be read shows from the start (not black until it came)
        images.append((entry["t"] if images else 0.0, image))
    return images


def _size(image: Any) -> tuple[int, int]:
    """An even size (H.264's 4:2:0) no wider than ``_MAX_VIDEO_WIDTH``."""
    w, h = image.size
    scale = min(1.0, _MAX_VIDEO_WIDTH / max(1, w))
    return max(2, int(w * scale) // 2 * 2), max(2, int(h * scale) // 2 * 2)


def _mux_audio(container: Any, stream: Any, wav: Path) -> None:
    import av

    with wave.open(str(wav), "rb") as w:
        pts = 0
        while True:
            raw = w.readframes(RATE)
            if not raw:
                break
            pcm = np.frombuffer(raw, "<i2").reshape(1, -1)  # packed stereo
            frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="stereo")
            frame.sample_rate, frame.pts = RATE, pts
            pts += pcm.shape[1] // 2
            container.mux(stream.encode(frame))
    container.mux(stream.encode())
