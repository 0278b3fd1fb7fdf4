"""A real SIP user agent for the phone tests: Debian's baresip (``apt-get install baresip-core``),
run headless. Its microphone is a WAV file (``aufile``), what it hears is written to a WAV file
(``sndfile``: ``dump-*-dec.wav``), and it is driven over its ``ctrl_tcp`` socket (netstring JSON
commands: dial, hangup, DTMF; and its events: call established, closed, transfer).

``nothing_held`` is the check every SIP test ends with: no call and no RTP port left held."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import numpy as np

from cluster import Cluster, free_port
from omnivox.audio.wav import read_wav, write_wav

MISSING = "baresip is not installed: run `apt-get install baresip-core` (make test and CI install it)"


class Baresip:
    def __init__(
        self, home: Path, mic: np.ndarray, user: str = "caller", auth: tuple[str, str] | None = None
    ) -> None:
        if shutil.which("baresip") is None:
            raise RuntimeError(MISSING)
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        (home / "snd").mkdir(exist_ok=True)
        (home / "mic.wav").write_bytes(write_wav(mic, 8000))
        creds = f";auth_user={auth[0]};auth_pass={auth[1]}" if auth else ""
        self.events: list[dict] = []
        self._buf = b""
        # baresip binds UDP and TCP on its SIP port and TLS on the next one (1.0.0 cannot leave
        # TLS out); a port taken between choosing and binding is a lost race, so start again
        for attempt in range(5):
            self.sip_port, self.ctrl_port, rtp = _sip_ports(), free_port(), free_port()
            if self._start(user, creds, rtp):
                break
            if "Address already in use" not in self.log_text() or attempt == 4:
                raise RuntimeError(f"baresip did not start: {self.log_text()[-2000:]}")
        self.ctrl.settimeout(0.1)

    def _start(self, user: str, creds: str, rtp: int) -> bool:
        """Start baresip on the chosen ports; False when it stopped or never opened its control port."""
        home = self.home
        (home / "config").write_text(
            "\n".join(
                [
                    "poll_method epoll",
                    f"sip_listen 127.0.0.1:{self.sip_port}",
                    "audio_player aubridge,nil",
                    f"audio_source aufile,{home / 'mic.wav'}",
                    "audio_alert aubridge,nil",
                    f"rtp_ports {rtp}-{rtp + 40}",
                    "module_path /usr/lib/baresip/modules",
                    "module g711.so",
                    "module aufile.so",
                    "module aubridge.so",
                    "module sndfile.so",
                    f"snd_path {home / 'snd'}",
                    "module ctrl_tcp.so",
                    f"ctrl_tcp_listen 127.0.0.1:{self.ctrl_port}",
                    "module_app account.so",
                    "module_app menu.so",
                    "net_interface 127.0.0.1",
                    "",
                ]
            )
        )
        (home / "accounts").write_text(
            f"<sip:{user}@127.0.0.1:{self.sip_port};transport=udp>{creds};regint=0;answermode=auto;"
            "audio_codecs=PCMU,PCMA\n"
        )
        self.log = open(home / "baresip.log", "wb")
        self.proc = subprocess.Popen(["baresip", "-f", str(home)], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30  # a loaded machine starts it slowly
        while True:
            try:
                self.ctrl = socket.create_connection(("127.0.0.1", self.ctrl_port), timeout=1)
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    return False
                time.sleep(0.1)
        return True

    def command(self, name: str, params: str = "") -> None:
        body = json.dumps({"command": name, "params": params, "token": name}).encode()
        self.ctrl.sendall(str(len(body)).encode() + b":" + body + b",")

    def poll(self) -> list[dict]:
        """Read what the control socket has: events and responses."""
        with contextlib.suppress(TimeoutError, OSError):
            while chunk := self.ctrl.recv(65536):
                self._buf += chunk
        while b":" in self._buf:
            size, _, rest = self._buf.partition(b":")
            if not size.isdigit() or len(rest) < int(size) + 1:
                break
            self.events.append(json.loads(rest[: int(size)]))
            self._buf = rest[int(size) + 1 :]
        return self.events

    def wait_event(self, kind: str, timeout: float = 20.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.poll():
                if event.get("type") == kind:
                    return event
            time.sleep(0.1)
        raise TimeoutError(f"baresip said no {kind}; said {[e.get('type') for e in self.events]}")

    def heard(self) -> tuple[np.ndarray, int]:
        """What it heard (the decoded far end), from the latest call."""
        files = sorted((self.home / "snd").glob("*-dec.wav"))
        assert files, "baresip recorded nothing"
        return read_wav(files[-1])

    def log_text(self) -> str:
        return (self.home / "baresip.log").read_bytes().decode(errors="replace")

    def stop(self) -> None:
        with contextlib.suppress(OSError, AttributeError):  # no ctrl: it never started
            self.ctrl.close()
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _sip_ports() -> int:
    """A free port whose next port is free too (baresip's SIP/TLS listens there)."""
    while True:
        port = free_port()
        with contextlib.suppress(OSError), socket.socket() as tls:
            tls.bind(("127.0.0.1", port + 1))
            return port


def nothing_held(c: Cluster, within_s: float = 10.0) -> None:
    """Until the gateway holds no SIP call and no RTP port (fails after ``within_s``)."""
    deadline = time.monotonic() + within_s
    while (held := (c.metric("omnivox_sip_calls"), c.metric("omnivox_rtp_ports_in_use"))) != (0, 0):
        assert time.monotonic() < deadline, f"still held (calls, ports): {held}"
        time.sleep(0.2)
