"""Keys on the wire: offered as a bearer token or a browser subprotocol, never a query string."""

from __future__ import annotations

import pytest

from omnivox.core.keys import bearer, is_loopback, key_matches, offered_key


def test_a_bearer_header_or_the_browser_subprotocol_offers_a_key() -> None:
    assert offered_key({"authorization": "Bearer k1"}) == "k1"
    assert offered_key({"authorization": "bearer  k1 "}) == "k1"
    assert offered_key({}, ["realtime", "openai-insecure-api-key.k2"]) == "k2"
    assert offered_key({"authorization": "Basic abc"}) is None
    assert offered_key({}) is None


def test_keys_match_exactly() -> None:
    assert key_matches("k", "k")
    assert not key_matches("k ", "k") and not key_matches("", "k") and not key_matches(None, "k")


def test_bearer_header() -> None:
    assert bearer("k") == {"Authorization": "Bearer k"} and bearer(None) == {}


def test_the_header_wins_over_the_subprotocol_and_the_first_subprotocol_key_counts() -> None:
    protocols = ["openai-insecure-api-key.k2", "openai-insecure-api-key.k3"]
    assert offered_key({"authorization": "Bearer k1"}, protocols) == "k1"
    assert offered_key({}, protocols) == "k2"
    assert offered_key({}, ["openai-insecure-api-key."]) == ""  # offered, and empty: matches no key
    assert offered_key({"authorization": "Bearer"}, ["realtime"]) is None  # no key after the scheme
    assert offered_key({"authorization": "Bearerk1"}) is None


def test_keys_of_any_characters_compare_without_error() -> None:
    assert key_matches("clé-ü", "clé-ü")
    assert not key_matches("clé", "cle") and not key_matches("é", "")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("0.0.0.0", False),  # every interface
        ("::", False),
        ("192.168.1.5", False),
        ("example.com", False),
        ("localhost.example.com", False),
        ("", False),
        ("[::1]", False),  # not an address as written: a key is required (the safe side)
    ],
)
def test_only_hosts_this_machine_alone_reaches_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
