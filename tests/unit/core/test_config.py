"""Settings: precedence (flags > OMNIVOX_* environment > config file > defaults), the limits each value
must keep, the keys each role needs, and each role's own section."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from omnivox.cli import build_parser, settings_from_args
from omnivox.core.config import (
    WORKER_ROLES,
    CommonSettings,
    ConfigError,
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


def test_defaults():
    s = Settings()
    assert (s.host, s.port, s.workers, s.engine, s.max_queue_size) == ("127.0.0.1", 8000, 1, "cascade", 1000)


def test_precedence(tmp_path, monkeypatch):
    cfg = tmp_path / "omnivox.toml"
    cfg.write_text('port = 9001\nworkers = 3\nengine = "tiny"\nmax_queue_size = 7\n')
    monkeypatch.setenv("OMNIVOX_WORKERS", "5")
    monkeypatch.setenv("OMNIVOX_ENGINE", "echo")
    s = load_settings(cfg, engine="transformers", port=None)
    assert s.port == 9001  # file
    assert s.workers == 5  # env beats file
    assert s.engine == "transformers"  # flag beats env
    assert s.max_queue_size == 7
    monkeypatch.setenv("OMNIVOX_CONFIG", str(cfg))
    assert load_settings().port == 9001


def test_bad_values_are_refused(tmp_path):
    with pytest.raises(ValueError):
        load_settings(port=70000)
    with pytest.raises(FileNotFoundError):
        load_settings(tmp_path / "missing.toml")


def test_cli_flags_map_to_settings():
    args = build_parser().parse_args(["serve", "--workers", "2", "--engine", "tiny", "--port", "8100"])
    s = settings_from_args(args)
    assert (s.workers, s.engine, s.port) == (2, "tiny", 8100)
    args = build_parser().parse_args(
        ["worker", "--gateway", "http://g:1", "--port", "9", "--host", "0.0.0.0"]
    )
    s = settings_from_args(args)
    assert (s.gateway_url, s.worker_port, s.worker_host) == ("http://g:1", 9, "0.0.0.0")


def test_pipeline_flags_map_to_settings():
    s = settings_from_args(build_parser().parse_args(["serve", "--pipeline", "cascade", "--workers", "4"]))
    assert (s.pipeline, s.workers) == ("cascade", 4)
    args = ["stage", "asr", "--pipeline", "cascade", "--coordinator", "tcp://h:5", "--host", "0.0.0.0"]
    parsed = build_parser().parse_args([*args, "--port", "7001", "--advertise", "gpu1", "--asr", "whisper"])
    s = settings_from_args(parsed)
    assert parsed.stage_name == "asr"
    assert (s.coordinator, s.stage_host, s.stage_port, s.stage_advertise) == (
        "tcp://h:5",
        "0.0.0.0",
        7001,
        "gpu1",
    )
    parsed = build_parser().parse_args(
        ["coordinator", "--pipeline", "noop", "--port", "7000", "--no-local-stages"]
    )
    assert (settings_from_args(parsed).coordinator_port, parsed.local_stages) == (7000, False)
    s = settings_from_args(build_parser().parse_args(["worker", "--coordinator", "tcp://h:5"]))
    assert s.coordinator == "tcp://h:5"


def test_workers_and_stages_inherit_the_pipeline_settings():
    from omnivox.gateway.local_workers import worker_env

    env = worker_env(load_settings(None, pipeline="cascade", coordinator="tcp://127.0.0.1:5000"))
    assert (
        env["OMNIVOX_COORDINATOR"] == "tcp://127.0.0.1:5000" and env["OMNIVOX_RELAY_SHARED_MEMORY"] == "true"
    )


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["serve"],
        ["gateway"],
        ["worker"],
        ["coordinator"],
        ["stage"],
        ["bench"],
        ["bench", "pool"],
        ["bench", "kv"],
        ["bench", "pipeline"],
    ],
)
def test_help_everywhere(argv):
    out = subprocess.run(
        [sys.executable, "-m", "omnivox", *argv, "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "usage:" in out.stdout


def test_local_workers_inherit_the_settings_given_to_serve():
    from omnivox.gateway.local_workers import worker_env

    s = load_settings(None, llm_url="http://llm:8000/v1", voice="heart", port=9000, worker_urls=["http://w"])
    env = worker_env(s)
    assert env["OMNIVOX_LLM_URL"] == "http://llm:8000/v1" and env["OMNIVOX_VOICE"] == "heart"
    assert env["OMNIVOX_ENGINE"] == "cascade" and env["OMNIVOX_MAX_MESSAGE_BYTES"] == str(s.max_message_bytes)
    # what belongs to the gateway, or to each worker's own command line, is not passed on
    assert "OMNIVOX_PORT" not in env and "OMNIVOX_WORKER_URLS" not in env and "OMNIVOX_API_KEY" not in env
    # and each value reads back as the same setting
    assert Settings(**{k.removeprefix("OMNIVOX_").lower(): v for k, v in env.items()}).llm_url == s.llm_url


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


def test_a_config_file_reads_lists_and_tables(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'worker_urls = ["http://x:1"]\nrecord_sessions = true\n'
        '[phone_profiles."+15550001111"]\ninstructions = "You take orders."\n'
    )
    s = load_settings(cfg)
    assert s.worker_urls == ["http://x:1"] and s.record_sessions is True
    assert s.phone_profiles["+15550001111"].instructions == "You take orders."
    assert isinstance(s, Settings) and type(s) is Settings  # the file's own class does not leak out


def test_a_config_file_naming_settings_omnivox_lacks_is_refused_with_their_names(tmp_path):
    cfg = tmp_path / "c.toml"
    # a typo, a table of the wrong name, and a dotted key quoted whole (one top-level name)
    cfg.write_text('recrod_sessions = true\n[server]\nport = 1\n["phone_profiles.+1555"]\nx = 1\n')
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    message = str(info.value)
    assert str(cfg) in message
    assert "recrod_sessions" in message and "server" in message and "phone_profiles.+1555" in message


def test_a_config_file_that_is_not_toml_is_an_error_naming_the_file(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("port = \n")
    with pytest.raises(ConfigError, match=r"c\.toml is not valid TOML"):
        load_settings(cfg)


def test_an_empty_rtp_port_range_is_refused():
    with pytest.raises(ValidationError, match="rtp_port_min"):
        load_settings(None, rtp_port_min=30000, rtp_port_max=20000)


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


# ---- what a broken configuration says


def test_an_explicit_config_file_beats_the_one_the_environment_names(tmp_path, monkeypatch):
    (tmp_path / "env.toml").write_text("port = 9001\n")
    (tmp_path / "flag.toml").write_text("port = 9002\n")
    monkeypatch.setenv("OMNIVOX_CONFIG", str(tmp_path / "env.toml"))
    assert load_settings(tmp_path / "flag.toml").port == 9002


def test_a_list_comes_from_the_environment_as_json_and_beats_the_file(tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text('worker_urls = ["http://file:1"]\n')
    monkeypatch.setenv("OMNIVOX_WORKER_URLS", '["http://env:1", "http://env:2"]')
    assert load_settings(cfg).worker_urls == ["http://env:1", "http://env:2"]
    monkeypatch.setenv("OMNIVOX_WORKER_URLS", "http://env:1")  # not JSON: refused, not split or dropped
    with pytest.raises(ValueError, match="worker_urls"):
        load_settings(cfg)


@pytest.mark.parametrize("body", [b"port = \n", b"port = 1\xff\n", b"[[port]\n"])
def test_a_config_file_that_is_not_toml_is_refused(tmp_path, body):
    cfg = tmp_path / "c.toml"
    cfg.write_bytes(body)
    with pytest.raises(ValueError):
        load_settings(cfg)


def test_a_folder_is_no_config_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_settings(tmp_path)


@pytest.mark.parametrize(("value", "port"), [(" 9000 ", 9000), ("9000", 9000)])
def test_numbers_in_the_environment_may_carry_spaces(monkeypatch, value, port):
    monkeypatch.setenv("OMNIVOX_PORT", value)
    assert Settings().port == port


@pytest.mark.parametrize(("name", "value"), [("OMNIVOX_PORT", ""), ("OMNIVOX_RECORD_SESSIONS", "maybe")])
def test_an_empty_or_unreadable_variable_is_refused_not_taken_as_unset(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()
