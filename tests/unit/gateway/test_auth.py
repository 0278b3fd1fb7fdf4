"""Roles, keys and origins at the gateway."""

from __future__ import annotations

import pytest

from omnivox.core.config import Settings
from omnivox.gateway.auth import allowed, origin_allowed


def test_api_key_alone_guards_every_role_and_own_keys_win() -> None:
    s = Settings(api_key="all")
    assert all(allowed(s, r, "all") and not allowed(s, r, None) for r in ("client", "admin", "worker"))
    s = Settings(api_key="all", admin_key="adm")
    assert allowed(s, "admin", "adm") and not allowed(s, "admin", "all")
    assert allowed(s, "client", "all") and not allowed(s, "client", "adm")


def test_no_key_means_the_role_is_open() -> None:
    s = Settings(admin_key="adm")
    assert allowed(s, "client", None) and allowed(s, "worker", None) and not allowed(s, "admin", None)
    assert not Settings().any_key and Settings(worker_key="w").any_key


@pytest.mark.parametrize(
    ("origin", "ok"),
    [
        (None, True),  # not a browser page
        ("http://gw:8000", True),  # the gateway's own pages
        ("https://gw:8000", True),
        ("http://gw:8001", False),
        ("http://evil.example", False),
        ("http://app.example", True),  # allowed
        ("null", False),
    ],
)
def test_origins(origin, ok) -> None:
    s = Settings(allowed_origins=["http://app.example"])
    headers = {"host": "gw:8000"} | ({"origin": origin} if origin else {})
    assert origin_allowed(s, headers) is ok


def test_a_wildcard_allows_every_origin() -> None:
    assert origin_allowed(Settings(allowed_origins=["*"]), {"host": "gw", "origin": "http://any"})
