"""Settings accepted but not served are said once each, naming the setting."""

from __future__ import annotations

from omnivox.protocol.realtime.session_config import SessionConfig, apply_update
from omnivox.voice.models import VoiceProfile
from omnivox.worker.realtime.warnings import SettingWarnings


def test_each_unserved_setting_is_said_once() -> None:
    profile = VoiceProfile("", ("heart",), "heart", 2048, 64, llm_name="local", asr_name="WhisperAsr")
    warnings = SettingWarnings(profile)
    patch = {
        "voice": "ash",
        "input_audio_transcription": {"model": "gpt-4o-mini-transcribe"},
        "tools": [{"type": "function", "name": "f"}],
        "tracing": "auto",
    }
    cfg = apply_update(SessionConfig(), patch)
    said = warnings.check(patch, cfg)
    assert {w.param for w in said} == {
        "session.audio.output.voice",
        "session.audio.input.transcription.model",
        "session.tools",
        "session.tracing",
    }
    assert all(w.type == "omnivox.warning" and w.code == "setting_not_served" for w in said)
    assert "local" in next(w.message for w in said if w.param == "session.tools")
    assert warnings.check(patch, cfg) == []  # not again
    served = SettingWarnings(VoiceProfile("", ("heart",), "heart", 2048, 64, tool_calls=True))
    ok = {"voice": "heart", "tools": [{"type": "function", "name": "f"}]}
    assert served.check(ok, apply_update(SessionConfig(), ok)) == []
