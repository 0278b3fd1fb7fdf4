"""What the OpenAI-compatible HTTP backends (ASR, TTS, LLM) share: URLs, auth, error mapping.

Servers in this family (vLLM, SGLang, llama.cpp, Ollama, speaches, Kokoro-FastAPI...) are configured
by a base URL. Users write it with or without the ``/v1`` suffix, so both are accepted. A failure of
the remote service (refused connection, timeout, HTTP error status, malformed body) becomes an
``EngineFailure`` that names the service and keeps the status, so callers never match on text.
"""

from __future__ import annotations

import httpx

from omnivox.core.errors import EngineFailure

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)


def v1_url(base_url: str) -> str:
    """``http://host:port`` or ``http://host:port/v1`` (trailing slash or not) -> ``.../v1``."""
    url = base_url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def make_client(base_url: str, api_key: str | None, timeout: httpx.Timeout | float | None) -> httpx.Client:
    return httpx.Client(
        base_url=v1_url(base_url),
        headers=auth_headers(api_key),
        timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
    )


def check_response(response: httpx.Response, service: str) -> None:
    """Raise ``EngineFailure`` unless ``response`` is a 2xx (reads a streamed body to report it)."""
    if response.is_success:
        return
    try:
        body = response.read().decode("utf-8", "replace")[:500]
    except httpx.HTTPError:
        body = ""
    raise EngineFailure(
        f"{service} server answered HTTP {response.status_code}",
        service=service,
        status=response.status_code,
        body=body,
    )


def transport_error(exc: httpx.HTTPError, service: str) -> EngineFailure:
    """An ``EngineFailure`` for a connection problem (refused, timed out, reset)."""
    return EngineFailure(f"{service} server unreachable: {type(exc).__name__}: {exc}", service=service)
