"""A FAKE of a remote OpenAI-compatible service, for testing omnivox's HTTP voice backends.

It imitates the wire format of ``/v1/models``, ``/v1/chat/completions`` (streamed as server-sent
events), ``/v1/audio/transcriptions`` (multipart upload) and ``/v1/audio/speech`` (raw PCM16 at
24 kHz) closely enough for the clients; it runs no model. Replies are deterministic functions of
the request so tests can check what went over the wire, and ``FakeState`` records every request.

Function calling: a chat request that offers ``tools`` and ends with a user message is answered with
one call of the first tool (or of ``FakeState.call_tool``; ``FakeState.tool_arguments``,
streamed in pieces, ``usage`` at the end),
or of every tool when ``parallel_calls``; one with tool results since the last user message answers
in words that quote them (``fake_tool_reply``), so a test can check that the result reached the
reply.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
import threading
import time
import wave
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import default as default_policy
from typing import Any

import numpy as np
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

SPEECH_RATE = 24000
SPEECH_MS_PER_CHAR = 10  # fake speech lasts 10 ms per input character


@dataclass
class FakeState:
    models: list[str] = field(default_factory=lambda: ["fake-model"])
    api_key: str | None = None  # when set, requests need "Authorization: Bearer <api_key>"
    token_delay_s: float = 0.0  # pause between streamed chat tokens
    reject_verbose_json: bool = False  # behave like a server without word timestamps
    fail_status: int | None = None  # answer every POST with this status
    models_status: int | None = None  # answer GET /v1/models with this status
    requests: list[dict[str, Any]] = field(default_factory=list)
    chat_tokens_sent: int = 0
    chat_disconnected: bool = False
    tool_arguments: dict[str, Any] = field(default_factory=lambda: {"city": "Paris"})
    parallel_calls: bool = False
    call_tool: str | None = None  # the offered tool it calls (None: the first)
    calls_made: int = 0


def fake_reply(messages: list[dict[str, Any]]) -> str:
    """What the fake chat model answers: it names the last user message."""
    last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    return f"Fake reply to: {last}. Have a nice day!"


def tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """What the tools returned since the user last spoke (their results in order)."""
    results: list[str] = []
    for m in reversed(messages):
        if m["role"] == "user":
            break
        if m["role"] == "tool":
            results.insert(0, m["content"])
    return results


def fake_tool_reply(messages: list[dict[str, Any]]) -> str:
    """What the fake chat model answers after its calls: it quotes what the tools returned."""
    return f"The tool said {' and '.join(tool_results(messages))}."


def _tool_chunks(state: FakeState, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat completion chunks that call the first tool (every tool, with ``parallel_calls``)."""
    chunks = []
    named = [t for t in tools if t["function"]["name"] == state.call_tool]
    for index, tool in enumerate(tools if state.parallel_calls else (named or tools)[:1]):
        state.calls_made += 1
        args = json.dumps(state.tool_arguments)
        call_id = f"call_fake_{state.calls_made}"
        head = {"index": index, "id": call_id, "type": "function"}
        chunks.append({**head, "function": {"name": tool["function"]["name"], "arguments": ""}})
        chunks += [
            {"index": index, "function": {"arguments": args[i : i + 5]}} for i in range(0, len(args), 5)
        ]
    return [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [c]}}]}
        for c in chunks
    ]


def fake_speech(text: str) -> np.ndarray:
    """PCM16 the fake speech server returns for ``text``: a 220 Hz tone, 10 ms per character."""
    n = len(text) * SPEECH_MS_PER_CHAR * SPEECH_RATE // 1000
    t = np.arange(n) / SPEECH_RATE
    return (np.sin(2 * np.pi * 220 * t) * 8000).astype("<i2")


def _parse_multipart(content_type: str, body: bytes) -> dict[str, Any]:
    msg = BytesParser(policy=default_policy).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
    )
    fields: dict[str, Any] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        fields[name] = payload if part.get_filename() else payload.decode()
    return fields


def build_app(state: FakeState) -> FastAPI:
    app = FastAPI(title="FAKE OpenAI-compatible service (tests only)")

    def denied(request: Request) -> Response | None:
        if state.api_key and request.headers.get("authorization") != f"Bearer {state.api_key}":
            return JSONResponse({"error": {"message": "bad key"}}, status_code=401)
        if state.fail_status and request.method == "POST":
            return JSONResponse({"error": {"message": "failing on purpose"}}, status_code=state.fail_status)
        return None

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        if (r := denied(request)) is not None:
            return r
        if state.models_status is not None:
            return JSONResponse({"error": {"message": "failing on purpose"}}, status_code=state.models_status)
        return JSONResponse({"object": "list", "data": [{"id": m, "object": "model"} for m in state.models]})

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        if (r := denied(request)) is not None:
            return r
        body = await request.json()
        state.requests.append({"path": "chat", **body})
        messages = body["messages"]
        calling = body.get("tools") and messages[-1]["role"] == "user" and body.get("tool_choice") != "none"
        answered = messages[-1]["role"] != "user" and tool_results(messages)
        reply = fake_tool_reply(messages) if answered else fake_reply(messages)
        tokens = [reply[i : i + 3] for i in range(0, len(reply), 3)]  # splits words, as real ones do
        calls = _tool_chunks(state, body["tools"]) if calling else []
        usage = {"prompt_tokens": 42, "completion_tokens": len(calls) or len(tokens), "total_tokens": 0}

        async def events():
            try:
                yield ": keep-alive\n\n"
                for chunk in calls:
                    yield f"data: {json.dumps(chunk)}\n\n"
                for tok in [] if calls else tokens:
                    if state.token_delay_s:
                        await asyncio.sleep(state.token_delay_s)
                    chunk = {
                        "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": {"content": tok}}],
                    }
                    state.chat_tokens_sent += 1
                    yield f"data: {json.dumps(chunk)}\n\n"
                yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
                yield "data: [DONE]\n\n"
            except asyncio.CancelledError:
                state.chat_disconnected = True
                raise

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/v1/audio/transcriptions")
    async def transcriptions(request: Request) -> Response:
        if (r := denied(request)) is not None:
            return r
        form = _parse_multipart(request.headers["content-type"], await request.body())
        state.requests.append({"path": "transcriptions", **{k: v for k, v in form.items() if k != "file"}})
        verbose = form.get("response_format") == "verbose_json"
        if verbose and state.reject_verbose_json:
            return JSONResponse({"error": {"message": "verbose_json unsupported"}}, status_code=400)
        with wave.open(io.BytesIO(form["file"]), "rb") as w:
            seconds = w.getnframes() / w.getframerate()
        text = f"heard {seconds:.2f} seconds"
        if not verbose:
            return JSONResponse({"text": text})
        words = [
            {"word": w, "start": i * seconds / 3, "end": (i + 1) * seconds / 3}
            for i, w in enumerate(text.split())
        ]
        return JSONResponse({"text": text, "words": words, "duration": seconds})

    @app.post("/v1/audio/speech")
    async def speech(request: Request) -> Response:
        if (r := denied(request)) is not None:
            return r
        body = await request.json()
        state.requests.append({"path": "speech", **body})
        if body.get("response_format") != "pcm":
            return JSONResponse({"error": {"message": "only pcm in this fake"}}, status_code=400)
        pcm = fake_speech(body["input"]).tobytes()

        async def chunks():
            for i in range(0, len(pcm), 1001):  # odd sizes: samples straddle network reads
                yield pcm[i : i + 1001]

        return StreamingResponse(chunks(), media_type="audio/pcm")

    return app


class FakeOpenAIService:
    """The fake app served by uvicorn on a free loopback port, in a background thread."""

    def __init__(self) -> None:
        self.state = FakeState()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(
            build_app(self.state), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="fake-openai", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cascade_env(self) -> dict[str, str]:
        """A test cluster's settings for a cascade whose LLM is this fake (PocketSphinx hears)."""
        return {
            "OMNIVOX_API_KEY": "secret",
            "OMNIVOX_LLM": "openai",
            "OMNIVOX_LLM_URL": f"{self.url}/v1",
            "OMNIVOX_ASR": "pocketsphinx",
        }

    def start(self) -> FakeOpenAIService:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake OpenAI service did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
