"""What the OpenAI-compatible backends share: base URLs with or without /v1, bearer auth, and remote
failures turned into ``EngineFailure`` that keeps the status and the start of the body."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from omnivox.core.errors import EngineFailure
from omnivox.voice.openai_compat import (
    DEFAULT_TIMEOUT,
    auth_headers,
    check_response,
    make_client,
    transport_error,
    v1_url,
)


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("http://host:8000", "http://host:8000/v1"),
        ("http://host:8000/", "http://host:8000/v1"),
        ("http://host:8000/v1", "http://host:8000/v1"),
        ("http://host:8000/v1/", "http://host:8000/v1"),
        ("http://host:8000/v1//", "http://host:8000/v1"),
        ("https://api.example.com/openai", "https://api.example.com/openai/v1"),
        ("https://api.example.com/openai/v1", "https://api.example.com/openai/v1"),
        ("http://host/v10", "http://host/v10/v1"),  # only a whole "/v1" suffix counts
    ],
)
def test_v1_url(base: str, url: str) -> None:
    assert v1_url(base) == url
    assert v1_url(v1_url(base)) == url  # idempotent


@pytest.mark.parametrize(
    ("key", "headers"), [(None, {}), ("", {}), ("sk-1", {"Authorization": "Bearer sk-1"})]
)
def test_auth_headers(key: str | None, headers: dict[str, str]) -> None:
    assert auth_headers(key) == headers


def test_make_client_targets_v1_with_auth_and_the_default_timeout() -> None:
    with make_client("http://host:9000/", "sk-2", None) as client:
        assert str(client.base_url) == "http://host:9000/v1/"
        assert client.headers["authorization"] == "Bearer sk-2"
        assert client.timeout == DEFAULT_TIMEOUT
        assert client.timeout.connect == 5.0 and client.timeout.read == 30.0
        assert client.build_request("GET", "/models").url == "http://host:9000/v1/models"


def test_make_client_without_a_key_sends_no_authorization() -> None:
    with make_client("http://host:9000", None, 3.0) as client:
        assert "authorization" not in client.headers
        assert client.timeout == httpx.Timeout(3.0)


def serve(status: int, body: bytes = b"", stream: bool = False) -> httpx.Response:
    """One response from a canned server, read whole or left streaming."""
    transport = httpx.MockTransport(lambda request: httpx.Response(status, content=body))
    with httpx.Client(transport=transport, base_url="http://canned") as client:
        if not stream:
            return client.get("/x")
        request = client.build_request("GET", "/x")
        return client.send(request, stream=True)


@pytest.mark.parametrize("status", [200, 201, 204, 299])
def test_success_passes(status: int) -> None:
    check_response(serve(status, b"fine"), "llm")  # no exception


@pytest.mark.parametrize("status", [301, 400, 401, 404, 422, 429, 500, 503])
def test_any_other_status_is_an_engine_failure_with_the_details(status: int) -> None:
    with pytest.raises(EngineFailure) as info:
        check_response(serve(status, b'{"error": "nope"}'), "speech")
    err = info.value
    assert err.details == {"service": "speech", "status": status, "body": '{"error": "nope"}'}
    assert str(status) in err.message and "speech" in err.message
    assert err.code == "engine_error" and err.fatal


def test_a_streamed_error_body_is_read_to_report_it() -> None:
    response = serve(500, b"model crashed", stream=True)
    with pytest.raises(EngineFailure) as info:
        check_response(response, "llm")
    assert info.value.details["body"] == "model crashed"


def test_the_body_is_cut_to_500_characters_and_bad_utf8_is_replaced() -> None:
    with pytest.raises(EngineFailure) as info:
        check_response(serve(500, b"x" * 2000), "llm")
    assert info.value.details["body"] == "x" * 500
    with pytest.raises(EngineFailure) as info:
        check_response(serve(502, b"bad \xff\xfe bytes"), "llm")
    assert info.value.details["body"] == "bad \ufffd\ufffd bytes"


class _Broken(httpx.SyncByteStream):
    """A response body whose connection drops while it is read."""

    def __iter__(self) -> Iterator[bytes]:
        raise httpx.ReadError("connection reset")


def test_an_error_body_that_cannot_be_read_is_reported_empty() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(500, stream=_Broken()))
    with httpx.Client(transport=transport, base_url="http://canned") as client:
        response = client.send(client.build_request("GET", "/x"), stream=True)
        with pytest.raises(EngineFailure) as info:
            check_response(response, "transcription")
    assert info.value.details == {"service": "transcription", "status": 500, "body": ""}


def test_transport_error_names_the_service_and_the_cause() -> None:
    err = transport_error(httpx.ConnectTimeout("timed out"), "llm")
    assert isinstance(err, EngineFailure)
    assert err.details == {"service": "llm"}
    assert err.message == "llm server unreachable: ConnectTimeout: timed out"


def test_a_refused_connection_through_make_client(dead_url) -> None:
    with make_client(dead_url, None, 2.0) as client:
        with pytest.raises(httpx.ConnectError) as info:
            client.get("/models")
    assert "unreachable: ConnectError" in transport_error(info.value, "llm").message
