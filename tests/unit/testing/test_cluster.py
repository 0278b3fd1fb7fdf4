"""The process launcher the tests and benches share: a child's output goes to its log, and the
launcher keeps no descriptor of that log (one per process started would leak over a long bench)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from omnivox.testing.cluster import free_port, spawn


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


def test_a_free_port_is_free_and_outside_the_kernels_ephemeral_range() -> None:
    """Servers listen where no client's outgoing connection is handed a port meanwhile."""
    low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    for _ in range(20):
        port = free_port()
        assert not low <= port <= high
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free: it binds
