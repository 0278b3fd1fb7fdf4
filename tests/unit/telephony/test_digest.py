"""SIP digest authentication, the server side: RFC 2617 / RFC 7616 (MD5, qop=auth) vectors, and
every way an ``Authorization`` header can be wrong."""

from __future__ import annotations

import hashlib

import pytest

from omnivox.telephony.digest import NONCE_TTL_S, DigestAuth

NOW = 1_800_000_000.0


def md5(s: str) -> str:
    return hashlib.md5(s.encode()).hexdigest()


def header(**params: str) -> str:
    quoted = {"qop", "nc", "algorithm"}
    return "Digest " + ", ".join(f"{k}={v}" if k in quoted else f'{k}="{v}"' for k, v in params.items())


def nonce_of(auth: DigestAuth) -> str:
    return auth.challenge().split('nonce="')[1].split('"')[0]


def credentials(auth: DigestAuth, nonce: str, password: str = "pw", **over: str) -> str:
    user, realm, uri = over.get("username", "trunk"), over.get("realm", auth.realm), "sip:agent@host"
    ha1, ha2 = md5(f"{user}:{realm}:{password}"), md5(f"INVITE:{uri}")
    nc = over.get("nc", "00000001")  # (each use of a nonce counts up)
    params = {
        "username": user,
        "realm": realm,
        "nonce": nonce,
        "uri": uri,
        "qop": "auth",
        "nc": nc,
        "cnonce": "c0ffee",
        "response": md5(f"{ha1}:{nonce}:{nc}:c0ffee:auth:{ha2}"),
    }
    return header(**{**params, **over})


def fixed(now: list[float]) -> DigestAuth:
    return DigestAuth("omnivox", {"trunk": "pw"}, clock=lambda: now[0])


@pytest.mark.parametrize(
    ("realm", "password", "nonce", "cnonce", "response"),
    [
        # RFC 2617 section 3.5
        (
            "testrealm@host.com",
            "Circle Of Life",
            "dcd98b7102dd2f0e8b11d0f600bfb0c093",
            "0a4f113b",
            "6629fae49393a05397450978507c4ef1",
        ),
        # RFC 7616 section 3.9.1 (MD5)
        (
            "http-auth@example.org",
            "Circle of Life",
            "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v",
            "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ",
            "8ca523f5e9506fed4657c9700eebdbec",
        ),
    ],
)
def test_the_rfcs_worked_examples_are_accepted(
    monkeypatch: pytest.MonkeyPatch, realm: str, password: str, nonce: str, cnonce: str, response: str
) -> None:
    auth = DigestAuth(realm, {"Mufasa": password})
    monkeypatch.setattr(auth, "_nonce_ok", lambda n: n == nonce)  # the RFC's nonce is none of ours
    good = header(
        username="Mufasa",
        realm=realm,
        nonce=nonce,
        uri="/dir/index.html",
        qop="auth",
        nc="00000001",
        cnonce=cnonce,
        response=response,
    )
    assert auth.check("POST", good) is None  # the method is part of what is signed
    assert auth.check("GET", good.replace("nc=00000001", "nc=00000002")) is None
    assert auth.check("GET", good.replace(response, response.upper())) == "Mufasa"  # hex in any case
    assert auth.check("GET", good) is None  # once: the same count again is a replay


def test_the_challenge_offers_md5_with_qop_auth_in_our_realm() -> None:
    auth = fixed([NOW])
    challenge = auth.challenge()
    assert challenge.startswith('Digest realm="omnivox", nonce="')
    assert 'algorithm=MD5, qop="auth"' in challenge
    assert nonce_of(auth).startswith(f"{int(NOW):x}.")
    assert nonce_of(auth) != nonce_of(auth)  # two challenges in one second: two nonces


def test_rfc2069_credentials_without_qop_are_accepted() -> None:
    auth = fixed([NOW])
    nonce = nonce_of(auth)
    ha1, ha2 = md5("trunk:omnivox:pw"), md5("INVITE:sip:agent@host")
    bare = dict(username="trunk", realm="omnivox", nonce=nonce, uri="sip:agent@host")
    assert auth.check("INVITE", header(**bare, response=md5(f"{ha1}:{nonce}:x"))) is None
    assert auth.check("INVITE", header(**bare, response=md5(f"{ha1}:{nonce}:{ha2}"))) == "trunk"
    assert auth.check("INVITE", header(**bare, response=md5(f"{ha1}:{nonce}:{ha2}"))) is None  # once


@pytest.mark.parametrize(
    "over",
    [
        {"realm": "elsewhere"},  # another realm's credentials
        {"username": "nobody"},
        {"qop": "auth-int"},  # not offered
        {"qop": "bogus"},
        {"algorithm": "SHA-256"},  # not offered
        {"uri": ""},
        {"response": ""},
        {"response": "é" * 32},  # non-ASCII: refused, never an exception
        {"username": "trunké"},
    ],
)
def test_wrong_or_unoffered_credentials_are_refused(over: dict[str, str]) -> None:
    auth = fixed([NOW])
    assert auth.check("INVITE", credentials(auth, nonce_of(auth), **over)) is None


def test_a_nonce_must_be_ours_and_fresh() -> None:
    now = [NOW]
    auth, other = fixed(now), fixed(now)
    nonce = nonce_of(auth)
    assert auth.check("INVITE", credentials(auth, nonce)) == "trunk"
    assert auth.check("INVITE", credentials(auth, nonce_of(other))) is None  # another process's secret
    # (below: each use of the nonce counts up, as its client would)
    issued, salt, tag = nonce.split(".")
    forged = [
        f"{int(issued, 16) + 1:x}.{salt}.{tag}",  # someone else's time under our tag
        f"0x{issued}.{salt}.{tag}",  # the same number, spelt otherwise
        f"{issued}.{salt}0.{tag}",  # another salt under our tag
        f"{issued}.{tag}",  # no salt
        "zz.00.00",
        "",
        "é.é.é",
        f"{issued}.{salt}.{tag}é",
    ]
    for bad in forged:
        assert auth.check("INVITE", credentials(auth, bad)) is None, bad
    now[0] = NOW + NONCE_TTL_S
    assert auth.check("INVITE", credentials(auth, nonce, nc="00000002")) == "trunk"  # its last second
    now[0] = NOW + NONCE_TTL_S + 1
    assert auth.check("INVITE", credentials(auth, nonce, nc="00000003")) is None
    now[0] = NOW - 1  # a nonce from the future (a clock that went back)
    assert auth.check("INVITE", credentials(auth, nonce, nc="00000004")) is None


@pytest.mark.parametrize(
    "raw",
    [None, "", "Basic dHJ1bms6cHc=", "Digest", "Digest ,,,", 'Digest username="trunk"', "digest x" * 2000],
)
def test_headers_that_are_no_digest_credentials_are_refused(raw: str | None) -> None:
    assert fixed([NOW]).check("INVITE", raw) is None


def test_credentials_overheard_place_no_second_call():
    auth = fixed([NOW])
    nonce = nonce_of(auth)
    once = credentials(auth, nonce)
    assert auth.check("INVITE", once, "sip:agent@host") == "trunk"
    assert auth.check("INVITE", once, "sip:agent@host") is None  # the same count again: a replay
    bare = dict(username="trunk", realm="omnivox", nonce=nonce_of(fixed([NOW + 1])), uri="sip:agent@host")
    # without qop (no count) a nonce is good once: here another process's nonce, so never
    assert auth.check("INVITE", header(**bare, response="0" * 32), "sip:agent@host") is None


def test_a_nonce_counted_up_by_its_own_client_is_good_again():
    auth = fixed([NOW])
    nonce = nonce_of(auth)
    for nc in ("00000001", "00000002", "0000000a"):
        assert auth.check("INVITE", credentials(auth, nonce, nc=nc), "sip:agent@host") == "trunk"
    assert auth.check("INVITE", credentials(auth, nonce, nc="00000003"), "sip:agent@host") is None
    assert auth.check("INVITE", credentials(auth, nonce, nc="zz"), "sip:agent@host") is None


def test_credentials_for_another_request_uri_are_refused():
    auth = fixed([NOW])
    signed = credentials(auth, nonce_of(auth))  # for sip:agent@host
    assert auth.check("INVITE", signed, "sip:billing@host") is None
    assert auth.check("INVITE", signed, "sip:agent@HOST;transport=udp") == "trunk"  # the same resource
