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
