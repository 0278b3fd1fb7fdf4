"""Keys on the wire: offered as a bearer token or a browser subprotocol, never a query string."""

from __future__ import annotations

from omnivox.core.keys import bearer, key_matches, offered_key


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
