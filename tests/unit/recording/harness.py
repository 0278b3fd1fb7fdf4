"""A duplex session's recording fed frames directly: what the recording tests share."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from omnivox.audio.pcm import float32_to_b64, pcm16_to_b64
from omnivox.protocol.registry import by_name
from omnivox.recording.session import Policy, RecordedSession, SessionRecording
from omnivox.recording.store import RecordingStore

UNIT = {
    "current_time": 1.0,
    "cost_prefill_ms": 1,
    "cost_generate_ms": 1,
    "cost_finalize_ms": 0,
    "wall_clock_ms": 5,
    "kv_cache_length": 1,
}


def duplex(
    store: RecordingStore, session_id: str = "dx-1", policy: Policy = Policy(True), **kw: Any
) -> SessionRecording:
    info = RecordedSession(session_id, "duplex", "audio_duplex", time.time(), 100.0)
    return SessionRecording(store, info, by_name("duplex").timeline_reader(), policy, **kw)


def send(rec: SessionRecording, at: float, from_client: bool, msg: dict[str, Any]) -> None:
    rec.frame(100.0 + at, from_client, json.dumps(msg))


def chunk(level: float = 0.2) -> dict[str, Any]:
    """One second of the user's microphone."""
    return {"type": "audio_chunk", "audio_base64": float32_to_b64(np.full(16000, level, np.float32))}


def speak(text: str = "hi") -> dict[str, Any]:
    """The assistant's reply: its text and one second of audio."""
    return {
        "type": "result",
        "unit_index": 0,
        "is_listen": False,
        "text": text,
        "end_of_turn": True,
        "audio_data": pcm16_to_b64(np.full(24000, 0.1, np.float32)),
        **UNIT,
    }
