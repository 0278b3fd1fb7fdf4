"""Settings precedence: flags > OMNIVOX_* environment > config file > defaults."""

from __future__ import annotations

import subprocess
import sys

import pytest

from omnivox.cli import build_parser, settings_from_args
from omnivox.core.config import Settings, load_settings


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
