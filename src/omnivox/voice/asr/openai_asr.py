"""Any OpenAI-compatible ``/v1/audio/transcriptions`` server (faster-whisper servers, speaches,
vLLM's Whisper, OpenAI itself) as a non-streaming recogniser: audio is buffered until ``flush``,
sent as one 16-bit WAV, and the final transcript comes back, with word times when the server gives
them (``verbose_json`` with word timestamps; servers that refuse that get plain ``json``).
"""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np

from omnivox.audio.wav import write_wav
from omnivox.core.errors import EngineFailure
from omnivox.voice.asr.base import Hypothesis, StreamingAsr
from omnivox.voice.openai_compat import check_response, make_client, transport_error

SERVICE = "transcription"


class OpenAIAsr(StreamingAsr):
    """Final-only ASR over HTTP. ``feed`` never returns partials."""

    streaming = False

    def __init__(
        self,
        base_url: str,
        model: str = "whisper-1",
        api_key: str | None = None,
        language: str | None = None,
        sample_rate: int = 16000,
        timeout: httpx.Timeout | float | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        super().__init__()
        self.sample_rate = sample_rate
        self.model = model
        self.language = language
        self._client = client or make_client(base_url, api_key, timeout)
        self._chunks: list[np.ndarray] = []
        self._word_timestamps = True  # cleared once a server refuses verbose_json

    def close(self) -> None:
        self._client.close()

    def _begin(self) -> None:
        self._chunks = []

    def _process(self, audio: np.ndarray) -> Hypothesis | None:
        self._chunks.append(audio)
        return None

    def _abandon(self) -> None:
        self._chunks = []  # nothing was sent, so nothing to cancel

    def _end(self) -> Hypothesis:
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.float32)
        self._chunks = []
        if not len(audio):
            return "", ()
        wav = write_wav(audio, self.sample_rate)
        body = self._request(wav, verbose=self._word_timestamps)
        if body is None:  # the server rejected verbose_json: plain json from now on
            self._word_timestamps = False
            body = self._request(wav, verbose=False)
        if body is None:
            raise EngineFailure(f"{SERVICE} server rejected the request", service=SERVICE)
        return _parse(body)

    def _request(self, wav: bytes, *, verbose: bool) -> dict[str, Any] | None:
        data: dict[str, Any] = {"model": self.model, "response_format": "verbose_json" if verbose else "json"}
        if verbose:
            data["timestamp_granularities[]"] = "word"
        if self.language:
            data["language"] = self.language
        try:
            r = self._client.post(
                "/audio/transcriptions", data=data, files={"file": ("audio.wav", wav, "audio/wav")}
            )
        except httpx.HTTPError as exc:
            raise transport_error(exc, SERVICE) from exc
        if verbose and r.status_code in (400, 422):
            return None
        check_response(r, SERVICE)
        try:
            body = r.json()
        except ValueError as exc:
            raise EngineFailure(f"{SERVICE} server sent a body that is not JSON", service=SERVICE) from exc
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            raise EngineFailure(f"{SERVICE} server response has no text", service=SERVICE)
        return body


def _parse(body: dict[str, Any]) -> Hypothesis:
    words = []
    for w in body.get("words") or ():
        try:
            words.append((str(w["word"]).strip(), float(w["start"]) * 1000.0, float(w["end"]) * 1000.0))
        except (KeyError, TypeError, ValueError):
            return body["text"].strip(), ()  # timings are optional: drop them rather than fail
    return body["text"].strip(), words
