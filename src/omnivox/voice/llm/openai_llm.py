"""Any OpenAI-compatible chat server (vLLM, SGLang, llama.cpp, Ollama, OpenAI) through httpx.

``POST /v1/chat/completions`` with ``stream: true``; the reply arrives as server-sent events, one JSON
chunk per ``data:`` line, ending with ``data: [DONE]``. httpx directly (rather than the ``openai``
SDK) keeps the runtime dependencies small and lets ``stop`` close the connection between any two
events; servers abort the generation when the client goes away.

When no model is configured, the one model the server lists at ``/v1/models`` is used (the usual
case for a local vLLM or llama.cpp); with several listed, a model must be named.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from omnivox.core.config import Settings
from omnivox.core.errors import EngineFailure
from omnivox.protocol.chat import ChatMessage, ImagePart, TextPart
from omnivox.voice.llm.base import ChatLlm, LlmEvent, LlmParams, ToolCallDelta, Usage
from omnivox.voice.openai_compat import check_response, make_client, transport_error

SERVICE = "llm"


class OpenAIChatLlm(ChatLlm):
    """Streaming chat completions from a remote OpenAI-compatible server."""

    name = "openai"
    vision = True  # images go to the server as image_url parts; a text-only server refuses them
    tool_calls = True  # tools go to the server as chat completions' ``tools``

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        timeout: httpx.Timeout | float | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url
        self._model = model
        self._client = client or make_client(base_url, api_key, timeout)
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIChatLlm:
        """Built from ``llm_url``, ``llm_model`` and ``llm_api_key``."""
        if not settings.llm_url:
            raise ValueError("llm_url is not set (OMNIVOX_LLM_URL)")
        return cls(settings.llm_url, settings.llm_model, settings.llm_api_key)

    def close(self) -> None:
        self._client.close()

    def list_models(self) -> list[str]:
        """Model ids the server serves (``GET /v1/models``)."""
        try:
            r = self._client.get("/models")
        except httpx.HTTPError as exc:
            raise transport_error(exc, SERVICE) from exc
        check_response(r, SERVICE)
        try:
            return [str(m["id"]) for m in r.json()["data"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise EngineFailure("llm server's /v1/models answer is malformed", service=SERVICE) from exc

    @property
    def model(self) -> str:
        """The configured model, else the only one the server lists (asked once)."""
        with self._lock:
            if self._model is None:
                models = self.list_models()
                if len(models) != 1:
                    raise EngineFailure(
                        f"llm server serves {len(models)} models; set llm_model to one of them",
                        service=SERVICE,
                        models=models[:20],
                    )
                self._model = models[0]
            return self._model

    def request_body(self, messages: Sequence[ChatMessage], params: LlmParams | None) -> dict[str, Any]:
        """The JSON sent for ``messages`` (text only: the cascade has transcribed any audio)."""
        p = params or LlmParams()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [wire_message(m) for m in messages],
            "stream": True,
        }
        if p.temperature is not None:
            body["temperature"] = p.temperature
        if p.max_tokens is not None:
            body["max_tokens"] = p.max_tokens
        if p.top_p is not None:
            body["top_p"] = p.top_p
        if p.stop_sequences:
            body["stop"] = list(p.stop_sequences)
        if p.tools:
            body["tools"] = list(p.tools)
            if p.tool_choice is not None:
                body["tool_choice"] = p.tool_choice
            if p.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = p.parallel_tool_calls
        return body

    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: LlmParams | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[str]:
        for event in self._events(self.request_body(messages, params), stop):
            if isinstance(event, str):
                yield event

    def stream_events(
        self,
        messages: Sequence[ChatMessage],
        params: LlmParams | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[LlmEvent]:
        body = self.request_body(messages, params)
        body["stream_options"] = {"include_usage": True}  # the token counts come in a last chunk
        yield from self._events(body, stop)

    def _events(self, body: dict[str, Any], stop: threading.Event | None) -> Iterator[LlmEvent]:
        stop = stop or threading.Event()
        try:
            with self._client.stream("POST", "/chat/completions", json=body) as r:
                check_response(r, SERVICE)
                for line in r.iter_lines():
                    if stop.is_set():
                        return  # leaving the block closes the connection: the server stops generating
                    events = _parse_event(line)
                    if events is _DONE:
                        return
                    yield from events
        except httpx.HTTPError as exc:
            raise transport_error(exc, SERVICE) from exc


_DONE = object()


def wire_message(message: ChatMessage) -> dict[str, Any]:
    """A message as chat completions take it: plain text, or text and image_url parts (and the
    function calls of an assistant message, the call a tool message answers)."""
    if message.tool_calls:
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
        return {"role": "assistant", "content": message.text() or None, "tool_calls": calls}
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.text()}
    if isinstance(message.content, str) or not any(isinstance(p, ImagePart) for p in message.content):
        return {"role": message.role, "content": message.text()}
    parts: list[dict[str, Any]] = []
    for p in message.content:
        if isinstance(p, TextPart):
            parts.append({"type": "text", "text": p.text})
        elif isinstance(p, ImagePart):
            mime = "image/jpeg" if p.data.startswith("/9j/") else "image/png"
            parts.append({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{p.data}"}})
    return {"role": message.role, "content": parts}


def _malformed(what: str) -> EngineFailure:
    return EngineFailure(f"llm server sent a malformed chat completion chunk: {what}", service=SERVICE)


def _parse_event(line: str) -> Any:
    """The events of one SSE line (content deltas, function call pieces, usage), ``_DONE`` at the end.

    Absent or null ``choices``, ``delta``, ``content`` and ``tool_calls`` mean nothing (role-only and
    finish chunks); anything of the wrong type is a malformed chunk and an ``EngineFailure``.
    """
    if not line.startswith("data:"):
        return []  # blank separators, ": keep-alive" comments, "event:" lines
    data = line[5:].strip()
    if data == "[DONE]":
        return _DONE
    try:
        chunk = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise EngineFailure("llm server sent an event that is not JSON", service=SERVICE) from exc
    if not isinstance(chunk, dict):
        raise EngineFailure("llm server sent an event that is not a JSON object", service=SERVICE)
    if chunk.get("error") is not None:
        err = chunk["error"]
        message = (err.get("message") or err) if isinstance(err, dict) else err
        raise EngineFailure(f"llm server error: {message}", service=SERVICE)
    out: list[LlmEvent] = []
    if isinstance(usage := chunk.get("usage"), dict):
        out.append(_usage(usage))
    choices = chunk.get("choices")
    if choices is None:
        return out  # e.g. a final usage-only chunk
    if not isinstance(choices, list):
        raise _malformed(f"'choices' is a {type(choices).__name__}, not a list")
    if not choices:
        return out
    choice = choices[0]
    if not isinstance(choice, dict):
        raise _malformed(f"a choice is a {type(choice).__name__}, not an object")
    delta = choice.get("delta")
    if delta is None:
        return out
    if not isinstance(delta, dict):
        raise _malformed(f"'delta' is a {type(delta).__name__}, not an object")
    content = delta.get("content")
    if content is not None and not isinstance(content, str):
        raise _malformed(f"'content' is a {type(content).__name__}, not a string")
    if content:
        out.insert(0, content)
    out += _tool_deltas(delta.get("tool_calls"))
    return out


def _tool_deltas(calls: Any) -> list[ToolCallDelta]:
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise _malformed(f"'tool_calls' is a {type(calls).__name__}, not a list")
    out = []
    for n, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict | None):
            raise _malformed("a tool call's 'function' is not an object")
        fn = fn or {}
        index, args = call.get("index", n), fn.get("arguments") or ""
        if not isinstance(index, int) or not isinstance(args, str):
            raise _malformed("a tool call's index or arguments has the wrong type")
        call_id, name = call.get("id"), fn.get("name")
        out.append(
            ToolCallDelta(
                index,
                call_id if isinstance(call_id, str) else None,
                name if isinstance(name, str) else None,
                args,
            )
        )
    return out


def _usage(usage: dict[str, Any]) -> Usage:
    def count(value: Any) -> int | None:
        return value if isinstance(value, int) else None

    details = usage.get("prompt_tokens_details")
    cached = count(details.get("cached_tokens")) if isinstance(details, dict) else None
    return Usage(count(usage.get("prompt_tokens")), count(usage.get("completion_tokens")), cached)
