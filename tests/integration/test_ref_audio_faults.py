"""Reference-audio uploads on a disk that will not take them (issue 25, finding 9): a real write
failure (the gateway process may write no file past 1 MB: the kernel refuses the write) is a clear
507 that leaves nothing behind, not a 500 with a ``.wav.tmp``; the next clip that fits is stored."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import httpx
import numpy as np

from cluster import Cluster
from omnivox.audio.wav import write_wav
from omnivox.testing.cluster import FAST

FILE_LIMIT = 1_000_000  # bytes: a 25 s clip stored at 24 kHz (1.2 MB) passes it, a 5 s one does not


def tone(seconds: float, rate: int = 16000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return write_wav((0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


def test_an_upload_the_disk_refuses_is_a_507_that_leaves_no_file(tmp_path):
    data = tmp_path / "data"
    c = Cluster(log_dir=tmp_path)
    env = {**os.environ, **FAST, "OMNIVOX_DATA_DIR": str(data), "OMNIVOX_REF_AUDIO_MIN_FREE_MB": "0"}
    with open(tmp_path / "gateway.log", "wb") as log:
        c.gateway = subprocess.Popen(
            [sys.executable, "-m", "omnivox", "gateway", "--port", str(c.port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_limited,
        )
    try:
        c.wait(lambda h: h["status"] in ("ok", "degraded"))
        url = c.url + "/api/assets/ref_audio"
        big = httpx.post(url, files={"file": ("long.wav", tone(25.0), "audio/wav")}, timeout=30)
        assert big.status_code == 507, big.text
        assert big.json()["detail"]["code"] == "storage_unavailable"
        assert sorted(p.name for p in (data / "ref_audio").iterdir()) == []  # no .wav.tmp, no .wav
        small = httpx.post(url, files={"file": ("short.wav", tone(5.0), "audio/wav")}, timeout=30)
        assert small.status_code == 201, small.text
        assert [r["id"] for r in httpx.get(url).json()["ref_audio"]] == [small.json()["id"]]
    finally:
        c.stop()
    assert "Traceback" not in (tmp_path / "gateway.log").read_text()
