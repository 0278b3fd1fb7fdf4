"""bench recording: a short minute of each kind through the recorder, figures that make sense."""

from __future__ import annotations

import argparse
import json

from omnivox.bench import recording as bench


def test_each_kind_is_recorded_and_measured(tmp_path, capsys) -> None:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    parser.add_argument("--json")
    out = tmp_path / "recording.json"
    assert bench.run(parser.parse_args(["--minutes", "0.25", "--json", str(out)])) == 0
    assert "| realtime |" in capsys.readouterr().out.replace("  ", " ")
    results = json.loads(out.read_text())["recording"]
    assert set(results) == {"realtime", "duplex", "omni", "streaming"}
    for kind, r in results.items():
        assert r["live_cpu_s_per_min"] > 0 and r["sessions_per_core"] > 10, (kind, r)
        # stereo 16-bit at 24 kHz is 5.76 MB a minute: the replay is most of what is kept
        assert 0.4 * 5.76 < r["replay_mb_per_min"] <= r["mb_per_min"] < 40, (kind, r)
    assert results["omni"]["mb_per_min"] > results["duplex"]["mb_per_min"]  # the frames and the video
