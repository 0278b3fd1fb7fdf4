"""A cascade worker (in process) serves many sessions on the models it loaded once."""

from __future__ import annotations

import time

import numpy as np
from fastapi.testclient import TestClient

from omnivox.audio.pcm import b64_to_pcm16, pcm16_to_b64
from omnivox.core.config import Settings
from omnivox.engines.cascade import CascadeEngine
from omnivox.voice.asr.base import word_error_rate
from omnivox.voice.asr.pocketsphinx_asr import PocketsphinxAsr
from omnivox.voice.tts.hibari import HibariTts
from omnivox.voice.vad.silero import SileroVad
from omnivox.worker.app import create_worker_app

SENTENCES = ["open the window", "turn on the light", "what time is it"]


def loads() -> tuple[int, int, int, int]:
    return CascadeEngine.loads, PocketsphinxAsr.loads, HibariTts.loads, SileroVad.loads


def test_ten_sessions_in_a_row_reuse_the_loaded_models() -> None:
    # the test's own voice, built before the worker starts loading (hibari's lazily loaded lexicons
    # are not meant to be loaded from two threads at once)
    speaker = HibariTts(seed=1)
    clips = {s: np.concatenate([c.audio for c in speaker.synthesize(s)]) for s in SENTENCES}
    app = create_worker_app(Settings(engine="cascade", llm="echo", asr="pocketsphinx"))
    with TestClient(app) as client:
        for _ in range(200):
            if client.get("/health").json()["state"] == "IDLE":
                break
            time.sleep(0.05)
        assert client.get("/health").json()["capabilities"]["realtime"] is True
        after_load = loads()
        heard = []
        for i in range(10):
            sentence = SENTENCES[i % len(SENTENCES)]
            part = {"type": "audio", "data": pcm16_to_b64(clips[sentence]), "sample_rate": 24000}
            with client.websocket_connect(f"/ws/streaming/s{i}") as ws:
                ws.send_json({"type": "prefill", "messages": [{"role": "user", "content": [part]}]})
                done = ws.receive_json()
                assert done["type"] == "prefill_done", done
                heard.append(done["transcript"])
                ws.send_json({"type": "generate", "generate_audio": True})
                audio = []
                while (msg := ws.receive_json())["type"] != "done":
                    if msg.get("audio_data"):
                        assert msg["audio_sample_rate"] == 24000
                        audio.append(b64_to_pcm16(msg["audio_data"]))
                assert np.abs(np.concatenate(audio)).max() > 0.05
        for _ in range(100):  # the last session is released as its socket winds down
            health = client.get("/health").json()
            if health["sessions_served"] == 10:
                break
            time.sleep(0.02)
        assert health["sessions_served"] == 10 and health["state"] == "IDLE"
        assert loads() == after_load  # no model was loaded again for any session
    assert all(word_error_rate(s, h) <= 0.34 for s, h in zip(SENTENCES, heard, strict=False))
    # the same speech gives the same words in every later session: nothing carried over
    assert heard[3:6] == heard[:3] and heard[6:9] == heard[:3], str(heard)
