"""Any OpenAI-compatible ``/v1/audio/speech`` server (OpenAI, Kokoro-FastAPI, speaches, vLLM-Omni...)
asked for ``response_format: "pcm"``: raw 16-bit mono at 24 kHz, streamed back as it is generated.
Each sentence is one request; its audio is yielded as the bytes arrive, and ``stop`` closes the
response at the next network chunk.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import numpy as np

from omnivox.audio.pcm import from_pcm16
from omnivox.voice.openai_compat import check_response, make_client, transport_error
from omnivox.voice.tts.base import OUTPUT_RATE, StreamingTts

SERVICE = "speech"
# yield at least this much audio at a time: many tiny network reads would make many tiny chunks
_MIN_CHUNK_BYTES = OUTPUT_RATE * 2 // 50  # 20 ms


class OpenAITts(StreamingTts):
    """Remote TTS. ``voices`` lists ``voice`` plus any others given; any name can be requested by
    adding it there, since servers do not agree on a way to list voices."""

    def __init__(
        self,
        base_url: str,
        model: str = "tts-1",
        voice: str = "alloy",
        api_key: str | None = None,
        speed: float = 1.0,
        extra_voices: tuple[str, ...] = (),
        timeout: httpx.Timeout | float | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.model = model
        self.default_voice = voice
        self.speed = speed
        self._voices = (voice, *(v for v in extra_voices if v != voice))
        self._client = client or make_client(base_url, api_key, timeout)

    @property
    def voices(self) -> tuple[str, ...]:
        return self._voices

    def close(self) -> None:
        self._client.close()

    def _synthesize(self, text: str, voice: str, stop: threading.Event, speed: float) -> Iterator[np.ndarray]:
        body = {
            "model": self.model,
            "input": text,
            "voice": voice,
            "response_format": "pcm",
            "speed": speed,
        }
        try:
            with self._client.stream("POST", "/audio/speech", json=body) as r:
                check_response(r, SERVICE)
                pending = b""
                for data in r.iter_bytes():
                    if stop.is_set():
                        return
                    pending += data
                    usable = len(pending) - len(pending) % 2  # a sample may straddle two reads
                    if usable >= _MIN_CHUNK_BYTES:
                        yield from_pcm16(pending[:usable])
                        pending = pending[usable:]
                usable = len(pending) - len(pending) % 2
                if usable:
                    yield from_pcm16(pending[:usable])
        except httpx.HTTPError as exc:
            raise transport_error(exc, SERVICE) from exc
