"""Helpers for the recording tests: the recordings API, the stereo replay, loudness over time."""

from __future__ import annotations

import io
import time
import wave
from typing import Any

import httpx
import numpy as np

RATE = 24000


def recording_env(data_dir: object, **extra: str) -> dict[str, str]:
    """A cluster that records, with predictable voice models (echo LLM, PocketSphinx)."""
    return {
        "OMNIVOX_RECORD_SESSIONS": "true",
        "OMNIVOX_DATA_DIR": str(data_dir),
        "OMNIVOX_RECORD_MIN_FREE_MB": "0",
        "OMNIVOX_LLM": "echo",
        "OMNIVOX_ASR": "pocketsphinx",
        **extra,
    }


def finished(
    base_url: str, recording_id: str, headers: dict[str, str] | None = None, timeout: float = 30.0
) -> dict:
    """GET /api/recordings/{id} once the recording is finished (its session may take a moment to end)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        resp = httpx.get(f"{base_url}/api/recordings/{recording_id}", headers=headers, timeout=5)
        last = resp.status_code, resp.text[:300]
        if resp.status_code == 200 and resp.json()["meta"]["status"] == "complete":
            return resp.json()
        time.sleep(0.2)
    raise TimeoutError(f"recording {recording_id} was not finished: {last}")


def stereo(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """A stereo 16-bit WAV -> (left, right) float32 at its rate (which must be RATE)."""
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (2, 2, RATE)
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2").reshape(-1, 2).astype(np.float32) / 32768
    return pcm[:, 0], pcm[:, 1]


def rms(channel: np.ndarray, start: float, end: float) -> float:
    part = channel[max(0, int(start * RATE)) : max(0, int(end * RATE))]
    return float(np.sqrt(np.mean(part**2))) if len(part) else 0.0


def loud_spans(
    channel: np.ndarray, threshold: float = 0.01, frame_s: float = 0.05
) -> list[tuple[float, float]]:
    """Where a channel is louder than ``threshold`` (RMS per frame), joined across gaps under 0.6 s."""
    n = int(frame_s * RATE)
    frames = len(channel) // n
    levels = np.sqrt(np.mean(channel[: frames * n].reshape(frames, n) ** 2, axis=1))
    spans: list[list[float]] = []
    for i in np.flatnonzero(levels > threshold):
        a, b = i * frame_s, (i + 1) * frame_s
        if spans and a - spans[-1][1] < 0.6:
            spans[-1][1] = b
        else:
            spans.append([a, b])
    return [(round(float(a), 2), round(float(b), 2)) for a, b in spans]
