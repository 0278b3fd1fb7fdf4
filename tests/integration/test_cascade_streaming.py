"""Turn-based streaming on the cascade engine, through real gateway and worker processes."""

from __future__ import annotations

import numpy as np
import pytest

from cluster import ECHO_VOICE, cluster
from omnivox.audio.pcm import b64_to_pcm16, pcm16_to_b64
from omnivox.voice.asr.base import word_error_rate
from omnivox.voice.tts.hibari import HibariTts
from wsclient import StreamingClient

WEATHER = "what is the weather like in paris today"


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return np.concatenate([c.audio for c in HibariTts(seed=0).synthesize(WEATHER)])


async def test_spoken_message_gets_text_and_speech_back(tmp_path, speech):
    with cluster(workers=1, engine="cascade", log_dir=tmp_path, **ECHO_VOICE) as c:
        part = {"type": "audio", "data": pcm16_to_b64(speech), "format": "pcm16", "sample_rate": 24000}
        messages = [{"role": "user", "content": [part]}]
        async with StreamingClient(c.ws, "voice-turn", timeout=30) as cl:
            first = await cl.turn(messages, generate_audio=True)
            assert "error" not in first, first
            heard = first["prefill_done"]["transcript"]
            assert word_error_rate(WEATHER, heard) <= 0.1
            assert first["text"] == f"You said: {heard}"
            audio_chunks = [ch for ch in first["chunks"] if ch.get("audio_data")]
            assert audio_chunks and {ch["audio_sample_rate"] for ch in audio_chunks} == {24000}
            audio = np.concatenate([b64_to_pcm16(ch["audio_data"]) for ch in audio_chunks])
            assert len(audio) > 24000 and np.sqrt(np.mean(audio**2)) > 0.01  # over a second, not silence
            assert first["done"]["stopped"] is False

            # the next turn (typed) lands on the worker holding the spoken history: a cache hit
            messages += [
                {"role": "assistant", "content": first["text"]},
                {"role": "user", "content": "thank you"},
            ]
            second = await cl.turn(messages)
            assert second["prefill_done"]["cache_hit"] is True
            assert second["text"] == "You said: thank you"
            assert not any(ch.get("audio_data") for ch in second["chunks"])

            # an undecodable audio part is refused with a code; the session goes on
            bad = {"type": "audio", "data": "%%%", "sample_rate": 16000}
            refused = await cl.turn([{"role": "user", "content": [bad]}])
            assert refused["error"]["code"] == "invalid_audio"
            again = await cl.turn([{"role": "user", "content": "still there?"}])
            assert again["text"] == "You said: still there?"
        c.wait_idle(1)
