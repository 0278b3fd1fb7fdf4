"""Settings from the environment, the keys each role needs, and each role's own section."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from omnivox.core.config import (
    WORKER_ROLES,
    CommonSettings,
    DuplexSettings,
    EngineSettings,
    GatewaySettings,
    PipelineSettings,
    RealtimeSettings,
    RecordingSettings,
    ServerSettings,
    Settings,
    TelephonySettings,
    VoiceSettings,
    WorkerSettings,
    load_settings,
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No OMNIVOX_* variable of the machine running the tests leaks in."""
    import os

    for name in list(os.environ):
        if name.startswith("OMNIVOX_"):
            monkeypatch.delenv(name)


# ---- the environment


def test_scalars_are_read_from_omnivox_variables(monkeypatch):
    monkeypatch.setenv("OMNIVOX_PORT", "9100")
    monkeypatch.setenv("OMNIVOX_HOST", "0.0.0.0")
    monkeypatch.setenv("OMNIVOX_HEALTH_INTERVAL_S", "0.5")
    monkeypatch.setenv("OMNIVOX_DATA_DIR", "/tmp/omnivox-data")
    s = Settings()
    assert (s.port, s.host, s.health_interval_s) == (9100, "0.0.0.0", 0.5)
    assert s.data_dir == Path("/tmp/omnivox-data")


@pytest.mark.parametrize(("raw", "value"), [("true", True), ("1", True), ("false", False), ("0", False)])
def test_booleans_from_the_environment(monkeypatch, raw, value):
    monkeypatch.setenv("OMNIVOX_PUBLIC", raw)
    monkeypatch.setenv("OMNIVOX_RECORD_SESSIONS", raw)
    s = Settings()
    assert s.public is value and s.record_sessions is value


def test_lists_are_json_in_the_environment(monkeypatch):
    monkeypatch.setenv("OMNIVOX_WORKER_URLS", '["http://a:1", "http://b:2"]')
    monkeypatch.setenv("OMNIVOX_ALLOWED_ORIGINS", '["https://app.example"]')
    s = Settings()
    assert s.worker_urls == ["http://a:1", "http://b:2"]
    assert s.allowed_origins == ["https://app.example"]


def test_names_are_case_insensitive(monkeypatch):
    monkeypatch.setenv("omnivox_engine", "echo")
    assert Settings().engine == "echo"


def test_variables_without_the_prefix_or_unknown_ones_are_ignored(monkeypatch):
    monkeypatch.setenv("PORT", "1234")
    monkeypatch.setenv("OMNIVOX_NO_SUCH_SETTING", "x")
    s = Settings()
    assert s.port == 8000 and not hasattr(s, "no_such_setting")


def test_unknown_keyword_settings_are_ignored():
    assert not hasattr(Settings(not_a_setting=1), "not_a_setting")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OMNIVOX_PORT", "-1"),
        ("OMNIVOX_PORT", "65536"),
        ("OMNIVOX_WORKERS", "65"),
        ("OMNIVOX_MAX_QUEUE_SIZE", "-5"),
        ("OMNIVOX_HEALTH_INTERVAL_S", "0"),
        ("OMNIVOX_ETA_EMA_ALPHA", "1.5"),
        ("OMNIVOX_LLM", "gpt"),
        ("OMNIVOX_ASR", "vosk"),
        ("OMNIVOX_BARGE_IN_MIN_MS", "2001"),
        ("OMNIVOX_AUDIO_LEAD_MS", "39"),
        ("OMNIVOX_MAX_MESSAGE_BYTES", "1023"),
        ("OMNIVOX_RECORD_QUEUE_BYTES", "1"),
        ("OMNIVOX_LLM_CONTEXT_TOKENS", "100"),
        ("OMNIVOX_PORT", "not a number"),
    ],
)
def test_out_of_range_or_unknown_values_are_refused(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


def test_optional_limits_may_be_unset_explicitly():
    s = Settings(retention_days=None, max_storage_gb=None)
    assert s.retention_days is None and s.max_storage_gb is None
    assert Settings().retention_days == 30.0 and Settings().max_storage_gb == 20.0


def test_load_settings_drops_flags_left_as_none(monkeypatch):
    monkeypatch.setenv("OMNIVOX_ENGINE", "tiny")
    s = load_settings(None, engine=None, workers=None, port=8123)
    assert s.engine == "tiny" and s.workers == 1 and s.port == 8123


def test_a_config_file_reads_lists_and_ignores_unknown_keys(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('worker_urls = ["http://x:1"]\nunknown_key = 3\nrecord_sessions = true\n')
    s = load_settings(cfg)
    assert s.worker_urls == ["http://x:1"] and s.record_sessions is True
    assert isinstance(s, Settings) and type(s) is Settings  # the file's own class does not leak out


def test_a_config_file_with_a_bad_value_is_refused(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("port = 99999\n")
    with pytest.raises(ValidationError):
        load_settings(cfg)


def test_a_missing_config_file_named_by_the_environment_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIVOX_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(FileNotFoundError, match=r"nope\.toml"):
        load_settings()


# ---- keys


def test_no_keys_means_every_role_is_open():
    s = Settings()
    assert [s.key_for(r) for r in ("client", "admin", "worker")] == [None, None, None]
    assert not s.any_key


def test_api_key_covers_every_role_without_its_own():
    s = Settings(api_key="all", admin_key="adm")
    assert s.key_for("client") == "all" and s.key_for("worker") == "all"
    assert s.key_for("admin") == "adm" and s.any_key


def test_one_role_s_key_alone_closes_only_that_role():
    s = Settings(worker_key="wk")
    assert s.key_for("worker") == "wk" and s.key_for("client") is None and s.key_for("admin") is None
    assert s.any_key


def test_an_empty_role_key_falls_back_to_api_key():
    s = Settings(api_key="all", client_key="")
    assert s.key_for("client") == "all"


# ---- sections


def test_role_gives_one_section_with_the_configured_values():
    s = Settings(llm_url="http://llm/v1", voice="heart", port=9000, barge_in_min_ms=300)
    voice = s.role(VoiceSettings)
    assert type(voice) is VoiceSettings
    assert voice.llm_url == "http://llm/v1" and voice.voice == "heart"
    assert not hasattr(voice, "port")
    assert s.role(RealtimeSettings).barge_in_min_ms == 300
    assert s.role(ServerSettings).port == 9000


def test_every_field_of_settings_belongs_to_exactly_one_section():
    sections = (
        ServerSettings,
        GatewaySettings,
        RecordingSettings,
        WorkerSettings,
        EngineSettings,
        VoiceSettings,
        RealtimeSettings,
        DuplexSettings,
        PipelineSettings,
        TelephonySettings,
        CommonSettings,
    )
    seen: dict[str, str] = {}
    for section in sections:
        for name in section.model_fields:
            assert name not in seen, f"{name} in {seen.get(name)} and {section.__name__}"
            seen[name] = section.__name__
    assert set(seen) == set(Settings.model_fields)


def test_worker_roles_leave_out_the_gateway_s_and_each_worker_s_own_settings():
    fields = {name for role in WORKER_ROLES for name in role.model_fields}
    assert "engine" in fields and "llm_url" in fields and "max_message_bytes" in fields
    assert not fields & set(ServerSettings.model_fields)
    assert not fields & set(GatewaySettings.model_fields)
    assert not fields & set(WorkerSettings.model_fields)


def test_section_defaults_match_the_composed_model():
    whole = Settings()
    for section in WORKER_ROLES:
        assert whole.role(section) == section()
