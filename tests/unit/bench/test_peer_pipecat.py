"""The pipecat peer's parts that need no server: its configuration, its turn strategies, and hibari
wrapped as a pipecat TTS service."""

from __future__ import annotations

import numpy as np
import pytest
from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy, TurnAnalyzerUserTurnStopStrategy

from omnivox.bench import peer_pipecat
from omnivox.bench.peer_pipecat import PeerConfig, SessionModels, turn_strategies


def config(**kw) -> PeerConfig:
    return PeerConfig(llm_url="http://127.0.0.1:1/v1", llm_model="m", **kw)


def test_a_config_refuses_an_unknown_detection_and_a_silence_shorter_than_the_vad_stop():
    with pytest.raises(ValueError, match="detection"):
        config(detection="push_to_talk")
    with pytest.raises(ValueError, match="VAD stop"):
        config(detection="server_vad", silence_ms=100)


def test_server_vad_ends_the_turn_after_the_same_total_pause():
    models = SessionModels(stt=None, tts=None, llm=None, vad=None, turn=None)
    (stop,) = turn_strategies(config(detection="server_vad", silence_ms=500), models).stop
    assert isinstance(stop, SpeechTimeoutUserTurnStopStrategy)
    # the VAD's own 200 ms stop and 300 ms more: omnivox's silence_duration_ms of 500
    assert stop._user_speech_timeout == pytest.approx(0.3)


def test_smart_turn_judges_at_each_vad_stop():
    analyzer = object()
    models = SessionModels(stt=None, tts=None, llm=None, vad=None, turn=analyzer)
    (stop,) = turn_strategies(config(detection="smart_turn"), models).stop
    assert isinstance(stop, TurnAnalyzerUserTurnStopStrategy) and stop._turn_analyzer is analyzer


async def test_hibari_as_a_pipecat_tts_service_yields_its_audio_at_24_khz():
    from omnivox.voice.tts.hibari import HibariTts

    service = peer_pipecat._hibari_service_class()(HibariTts())
    frames = [f async for f in service.run_tts("Hello there.", "c1")]
    assert frames and all(isinstance(f, TTSAudioRawFrame) for f in frames)
    assert {f.sample_rate for f in frames} == {24000} and {f.context_id for f in frames} == {"c1"}
    audio = np.frombuffer(b"".join(f.audio for f in frames), "<i2")
    assert np.abs(audio).max() > 1000  # speech, not silence


async def test_a_hibari_failure_is_an_error_frame_not_a_crash():
    class Broken:
        default_voice = "x"

        def synthesize(self, text: str):
            raise RuntimeError("no voice")
            yield  # a generator, as hibari's

    service = peer_pipecat._hibari_service_class()(Broken())
    (frame,) = [f async for f in service.run_tts("Hello.", "c1")]
    assert isinstance(frame, ErrorFrame) and "no voice" in frame.error


def test_the_bot_process_and_its_log_are_let_go_when_the_block_ends(tmp_path, monkeypatch):
    """A short ``sleep`` process stands in for the pipecat bot (a mock: no models in a unit test)."""
    import subprocess
    import sys

    real_open, real_popen, started, opened = open, subprocess.Popen, [], []

    def popen(cmd, stdout, stderr):
        assert cmd[1:3] == ["-m", "omnivox.bench.peer_pipecat"] and cmd[cmd.index("--sessions") + 1] == "3"
        started.append(real_popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=stdout))
        return started[-1]

    def tracked_open(*args, **kwargs):
        opened.append(real_open(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(peer_pipecat.subprocess, "Popen", popen)
    monkeypatch.setattr(peer_pipecat, "open", tracked_open, raising=False)
    monkeypatch.setattr(peer_pipecat, "_ready", lambda base, sessions: True)
    with peer_pipecat.pipecat_server(config(detection="smart_turn"), 3, log=tmp_path / "bot.log") as server:
        assert server.pid == started[0].pid and server.ws_url.startswith("ws://127.0.0.1:")
    assert started[0].returncode is not None  # stopped
    assert len(opened) == 1 and opened[0].closed  # the log file is not left open
