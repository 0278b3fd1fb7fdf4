"""Starting a gateway: without keys it listens on loopback only (unless told), and says so."""

from __future__ import annotations

import logging

import pytest

from omnivox.cli import build_parser, settings_from_args
from omnivox.core.config import Settings
from omnivox.gateway.serve import check_exposure, is_loopback, serve_settings


@pytest.mark.parametrize(
    ("host", "loop"),
    [("127.0.0.1", True), ("::1", True), ("localhost", True), ("0.0.0.0", False), ("10.1.2.3", False)],
)
def test_loopback(host, loop) -> None:
    assert is_loopback(host) is loop


def test_no_keys_and_a_public_address_is_refused(caplog) -> None:
    with pytest.raises(SystemExit, match=r"refusing to listen on 0\.0\.0\.0 without keys"):
        check_exposure(Settings(host="0.0.0.0"))
    with caplog.at_level(logging.WARNING):
        check_exposure(Settings(host="0.0.0.0", public=True))  # told to: allowed, and said
        check_exposure(Settings(host="127.0.0.1"))
    assert sum("no keys configured" in r.message for r in caplog.records) == 2


def test_any_key_allows_a_public_address() -> None:
    check_exposure(Settings(host="0.0.0.0", api_key="k"))
    check_exposure(Settings(host="0.0.0.0", client_key="c", admin_key="a"))


def test_serve_records_by_default_and_a_bare_gateway_does_not() -> None:
    assert Settings().record_sessions is None  # the gateway alone: nothing recorded
    assert serve_settings(Settings()).record_sessions is True
    assert serve_settings(Settings(record_sessions=False)).record_sessions is False
    made = serve_settings(Settings())
    assert made.worker_key and serve_settings(Settings(worker_key="w")).worker_key == "w"
    for argv, expected in (
        (["serve"], None),
        (["serve", "--no-record"], False),
        (["gateway", "--record"], True),
    ):
        assert settings_from_args(build_parser().parse_args(argv)).record_sessions is expected
