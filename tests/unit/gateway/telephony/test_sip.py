"""The SIP edge's pure helpers: the dialled number of a URI, and an INVITE's headers as the webhook
lists them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from omnivox.gateway.telephony.sip import _headers, _user


@pytest.mark.parametrize(
    ("uri", "user"),
    [
        ("sip:+15550001@gw.example", "+15550001"),
        ("sips:alice@gw.example:5061;transport=tls", "alice"),
        ("sip:100@10.0.0.1;user=phone", "100"),
        ("sip:gw.example", None),  # no user part: no number
        ("tel:+15550001", None),
        ("", None),
    ],
)
def test_the_user_part_of_a_sip_uri_is_the_dialled_number(uri, user) -> None:
    assert _user(uri) == user


def _incoming(headers: dict[str, Any]) -> Any:
    return SimpleNamespace(invite=SimpleNamespace(headers=headers))


def test_headers_are_listed_one_value_each_in_order_as_strings() -> None:
    listed = _headers(_incoming({"From": "<sip:a@b>", "Via": ["v1", "v2"], "Max-Forwards": 70}))
    assert listed == [
        {"name": "From", "value": "<sip:a@b>"},
        {"name": "Via", "value": "v1"},
        {"name": "Via", "value": "v2"},
        {"name": "Max-Forwards", "value": "70"},
    ]


def test_an_invite_with_very_many_headers_lists_only_the_first_64() -> None:
    listed = _headers(_incoming({"X-Many": [str(i) for i in range(500)], "X-Last": "z"}))
    assert len(listed) == 64 and listed[-1] == {"name": "X-Many", "value": "63"}
