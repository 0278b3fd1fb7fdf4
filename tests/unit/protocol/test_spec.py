"""A wire protocol described once: worker URLs, parsers and the defaults of the optional hooks."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from omnivox.core.config import Settings
from omnivox.core.errors import InvalidMessage, OmnivoxError, QueueFull, UnknownMessageType
from omnivox.protocol import streaming as sp
from omnivox.protocol.spec import Parser, TurnRoute, WireProtocol


class Minimal(WireProtocol):
    """Only what a protocol must say; every other hook keeps its default."""

    name = "minimal"
    path = "/ws/minimal/{session_id}"
    worker_paths = ("/ws/minimal", "/ws/minimal/{session_id}")
    scope = "session"
    parser = Parser(sp.CLIENT_ADAPTER)

    def task_type(self, session_id, query):
        return "streaming"

    def error_frame(self, err, event_id=None):
        return err.code

    def notice_frame(self, notice):
        return None


PROTO = Minimal()


def test_a_protocol_must_say_its_task_type_and_its_wording():
    class Incomplete(WireProtocol):
        name = "incomplete"

    with pytest.raises(TypeError):
        Incomplete()


def test_defaults_of_the_optional_hooks():
    s = Settings()
    err = QueueFull("full")
    assert PROTO.session_id({"session_id": "s1"}, {"session_id": "q"}) == "s1"  # the path names it
    assert PROTO.session_id({}, {"session_id": "q"}) is None  # None: the gateway makes one up
    assert PROTO.subprotocol([]) is None
    # a browser's key travels as a subprotocol: the handshake must answer one of those offered
    assert PROTO.subprotocol(["openai-insecure-api-key.k"]) == "openai-insecure-api-key.k"
    assert PROTO.worker_params({"openai-beta": "realtime=v1"}, {"a": "b"}) == {}
    assert PROTO.max_wait_s(s) is None and PROTO.held_bytes(s) == 0
    assert PROTO.error_code(err) == "queue_full"
    assert PROTO.refusal(err) is err
    stop = sp.Stop()
    prefill = sp.Prefill(messages=[{"role": "user", "content": "hi"}])
    for msg in (stop, prefill, sp.Close(), sp.Generate()):
        assert PROTO.turn_start(msg) is None and PROTO.ends_session(msg) is False
        assert PROTO.between_turns(msg) is None


def test_error_code_is_the_error_s_own_code_not_the_realtime_one():
    err = InvalidMessage("bad")
    assert PROTO.error_code(err) == "invalid_message" != err.wire_code


# ---- worker_url


def url(base: str, session_id: str = "s1", params: dict | None = None) -> str:
    return PROTO.worker_url(base, session_id, params or {})


def test_worker_url_takes_the_last_worker_path_and_a_websocket_scheme():
    assert url("http://w:9000") == "ws://w:9000/ws/minimal/s1"
    assert url("https://w.example") == "wss://w.example/ws/minimal/s1"
    assert url("http://w:9000/") == "ws://w:9000/ws/minimal/s1"
    assert url("http://w:9000///") == "ws://w:9000/ws/minimal/s1"
    assert url("w:9000") == "ws://w:9000/ws/minimal/s1"  # no scheme: plain ws
    assert url("ws://w:1") == "ws://w:1/ws/minimal/s1"


def test_worker_url_keeps_a_base_path():
    assert url("https://host/pool/w3/") == "wss://host/pool/w3/ws/minimal/s1"


@pytest.mark.parametrize(
    ("session_id", "escaped"),
    [
        ("a b", "a%20b"),
        ("a#b", "a%23b"),
        ("a/b", "a%2Fb"),
        ("../admin", "..%2Fadmin"),
        ("a?x=1", "a%3Fx%3D1"),
        ("a%20b", "a%2520b"),
        ("café-日本", "caf%C3%A9-%E6%97%A5%E6%9C%AC"),
        ("A-z_0.9~", "A-z_0.9~"),
    ],
)
def test_worker_url_escapes_the_client_chosen_session_id(session_id, escaped):
    assert url("http://w:1", session_id) == f"ws://w:1/ws/minimal/{escaped}"


def test_worker_url_encodes_params_as_a_query():
    assert url("http://w:1", "s", {"beta": "1"}) == "ws://w:1/ws/minimal/s?beta=1"
    assert url("http://w:1", "s", {"a": "x y", "b": "1&c=2", "é": "#"}) == (
        "ws://w:1/ws/minimal/s?a=x+y&b=1%26c%3D2&%C3%A9=%23"
    )
    assert "?" not in url("http://w:1", "s", {})


def test_worker_url_of_a_real_protocol():
    assert (
        sp.STREAMING.worker_url("https://gpu1:8443/", "conv 1", {}) == "wss://gpu1:8443/ws/streaming/conv%201"
    )


# ---- Parser


def test_parser_knows_its_tags_and_parses_with_the_limit_it_is_given():
    parser = Parser(sp.CLIENT_ADAPTER)
    assert parser.tags == sp.CLIENT_TYPES
    assert isinstance(parser('{"type": "stop"}', 100), sp.Stop)
    with pytest.raises(OmnivoxError) as info:
        parser('{"type": "stop", "pad": "' + "x" * 100 + '"}', 50)
    assert info.value.code == "message_too_large"


def test_parser_applies_its_aliases():
    parser = Parser(sp.CLIENT_ADAPTER, {"halt": "stop"})
    assert isinstance(parser('{"type": "halt"}', 100), sp.Stop)
    assert "halt" not in parser.tags
    with pytest.raises(UnknownMessageType):
        Parser(sp.CLIENT_ADAPTER)('{"type": "halt"}', 100)


def test_parser_needs_a_discriminated_union():
    with pytest.raises(ValueError):
        Parser(TypeAdapter(dict))


def test_parser_and_turn_start_are_frozen():
    parser = Parser(sp.CLIENT_ADAPTER)
    with pytest.raises(AttributeError):
        parser.aliases = {}
    start = TurnRoute("abc")
    with pytest.raises(AttributeError):
        start.history_hash = None
    assert TurnRoute("abc") == start
