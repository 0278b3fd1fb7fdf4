"""The command line: settings it cannot build end the command with one line naming what is wrong,
never a traceback."""

from __future__ import annotations

import pytest

from omnivox.cli import main


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("port = \n", "is not valid TOML"),
        ("recrod_sessions = true\n", "recrod_sessions"),
        ("rtp_port_min = 30000\nrtp_port_max = 20000\n", "rtp_port_min"),
        ("port = 99999\n", "port"),
    ],
)
def test_a_config_file_omnivox_cannot_use_ends_the_command_with_its_reason(tmp_path, text, said):
    cfg = tmp_path / "omnivox.toml"
    cfg.write_text(text)
    with pytest.raises(SystemExit) as info:
        main(["serve", "--config", str(cfg)])
    assert isinstance(info.value.code, str) and info.value.code.startswith("omnivox: ")
    assert said in info.value.code


def test_a_missing_config_file_is_named(tmp_path):
    with pytest.raises(SystemExit) as info:
        main(["gateway", "--config", str(tmp_path / "nope.toml")])
    assert "nope.toml" in str(info.value.code)


@pytest.mark.parametrize(
    "argv",
    [
        ["worker", "--engine", "cascade", "--seats", "3"],
        ["serve", "--engine", "local", "--seats", "2"],  # (no --pipeline: in-process workers)
    ],
)
def test_seats_for_an_engine_with_in_process_models_end_the_command_with_the_reason(argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert isinstance(info.value.code, str) and info.value.code.startswith("omnivox: --seats")
    assert "pipeline" in info.value.code


def test_seats_are_counted_from_one():
    with pytest.raises(SystemExit) as info:
        main(["worker", "--engine", "echo", "--seats", "0"])
    assert "seats" in str(info.value.code)


def test_serve_refuses_more_seats_than_the_gateway_takes_workers():
    with pytest.raises(SystemExit) as info:
        main(["serve", "--pipeline", "cascade", "--workers", "9", "--seats", "8"])
    assert "72 workers" in str(info.value.code) and "64" in str(info.value.code)
