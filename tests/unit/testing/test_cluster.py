"""The process launcher the tests and benches share: a child's output goes to its log, and the
launcher keeps no descriptor of that log (one per process started would leak over a long bench)."""

from __future__ import annotations

import os
from pathlib import Path

from omnivox.testing.cluster import spawn


def _open_here(path: Path) -> int:
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) == str(path.resolve()))


def test_a_child_writes_its_log_and_the_launcher_keeps_no_descriptor_of_it(tmp_path):
    log = tmp_path / "child.log"
    child = spawn(["--help"], {}, log)
    assert _open_here(log) == 0
    assert child.wait(60) == 0
    assert "usage: omnivox" in log.read_text()


def test_without_a_log_the_output_goes_nowhere(tmp_path):
    child = spawn(["--help"], {})
    assert child.wait(60) == 0 and child.stdout is None
