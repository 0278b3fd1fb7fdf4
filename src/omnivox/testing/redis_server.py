"""A real ``redis-server`` (Debian's package) for tests and benchmarks: started on a free port and a
unix socket in a temporary directory, nothing saved, stopped (or restarted empty, or paused) on
demand."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from omnivox.testing.cluster import free_port


class RedisServer:
    def __init__(
        self, directory: Path, port: int | None = None, config: Path | None = None, extra: Sequence[str] = ()
    ) -> None:
        self.dir = directory
        self.port = port or free_port()
        self.config = config  # a configuration file (a sentinel's: it writes what it learns there)
        self.extra = list(extra)  # more arguments (``--replicaof host port``, ``--sentinel``)
        self.socket = directory / "redis.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @property
    def unix_url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        config = [str(self.config)] if self.config is not None else []
        self.proc = subprocess.Popen(
            [
                binary,
                *config,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--unixsocket", str(self.socket),
                "--unixsocketperm", "700",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.dir),
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
            time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused server cannot stop
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def restart_empty(self) -> None:
        """Kill it and start a new one on the same port: everything it held is gone."""
        self.stop()
        self.start()

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    with tempfile.TemporaryDirectory(prefix="omnivox-redis-") as tmp:
        server = RedisServer(Path(tmp))
        server.start()
        try:
            yield server
        finally:
            server.stop()
