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
