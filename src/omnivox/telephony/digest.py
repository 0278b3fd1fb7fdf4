"""SIP digest authentication, the server side (RFC 3261 section 22, RFC 7616 with MD5 and qop=auth).

Nonces are stateless: an HMAC under a secret this process makes, of the time they were issued,
so a nonce is good for ``NONCE_TTL_S`` and a forged or stale one is refused. Credentials are
compared in constant time, as bytes (a header may hold any character; it is refused, never an
exception).

Replays: credentials are for one request-URI (the ``uri`` they sign must name the request's, RFC
3261 section 22.4), and each use of a nonce must count up (``nc``, RFC 7616 section 3.4; without
``qop`` a nonce is good once), so credentials overheard on the wire place no second call.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from aiosipua import parse_auth

NONCE_TTL_S = 300


def _md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


class DigestAuth:
    """Challenges and checks the credentials of SIP trunks (``users``: name -> password)."""

    def __init__(self, realm: str, users: dict[str, str], clock=time.time) -> None:  # type: ignore[no-untyped-def]
        self.realm = realm
        self.users = users
        self.clock = clock
        self._secret = secrets.token_bytes(32)
        self._counts: dict[str, int] = {}  # a nonce in use -> the highest count it was used with

    def _nonce(self, issued: int, salt: str) -> str:
        tag = hmac.new(self._secret, f"{issued}.{salt}".encode(), "sha256").hexdigest()[:32]
        return f"{issued:x}.{salt}.{tag}"

    def _nonce_ok(self, nonce: str) -> bool:
        issued = _issued(nonce)
        parts = nonce.split(".")
        if issued is None or len(parts) != 3:
            return False
        fresh = 0 <= self.clock() - issued <= NONCE_TTL_S
        return fresh and hmac.compare_digest(nonce.encode(), self._nonce(issued, parts[1]).encode())

    def _counts_up(self, nonce: str, nc: str | None) -> bool:
        """Whether this use of ``nonce`` counts past every earlier one (and note it)."""
        try:
            count = int(nc, 16) if nc is not None else 0
        except ValueError:
            return False
        if nonce in self._counts and count <= self._counts[nonce]:
            return False
        now = self.clock()  # (stale nonces are refused anyway: forget them)
        for old in [n for n in self._counts if now - (_issued(n) or 0) > NONCE_TTL_S]:
            del self._counts[old]
        self._counts[nonce] = count
        return True

    def challenge(self) -> str:
        """A ``WWW-Authenticate`` header value."""
        # (a salt: two challenges in one second are two nonces, each counted on its own)
        nonce = self._nonce(int(self.clock()), secrets.token_hex(8))
        return f'Digest realm="{self.realm}", nonce="{nonce}", algorithm=MD5, qop="auth"'

    def check(self, method: str, authorization: str | None, request_uri: str | None = None) -> str | None:
        """The user an ``Authorization`` header proves for a request to ``request_uri`` (None:
        missing, wrong, stale, replayed, or signed for another URI)."""
        if not authorization or not authorization.lstrip().lower().startswith("digest"):
            return None
        try:
            creds = parse_auth(authorization, credentials=True)
        except (ValueError, IndexError):
            return None
        params = {k.lower(): v for k, v in creds.params.items()}
        user, nonce, uri, response = (params.get(k) for k in ("username", "nonce", "uri", "response"))
        if not (user and nonce and uri and response) or params.get("realm") != self.realm:
            return None
        if request_uri is not None and not _same_resource(uri, request_uri):
            return None
        password = self.users.get(user)
        if password is None or not self._nonce_ok(nonce):
            return None
        if params.get("algorithm", "MD5").upper() != "MD5":
            return None
        ha1 = _md5(f"{user}:{self.realm}:{password}")
        ha2 = _md5(f"{method}:{uri}")
        qop = params.get("qop")
        if qop == "auth":
            nc, cnonce = params.get("nc", ""), params.get("cnonce", "")
            expected = _md5(f"{ha1}:{nonce}:{nc}:{cnonce}:auth:{ha2}")
        elif qop is None:
            expected = _md5(f"{ha1}:{nonce}:{ha2}")
        else:
            return None
        # bytes: compare_digest refuses str with non-ASCII characters (a hostile header's)
        if not hmac.compare_digest(expected.encode(), response.lower().encode()):
            return None
        return user if self._counts_up(nonce, params.get("nc") if qop else None) else None


def _issued(nonce: str) -> int | None:
    issued_hex, _, _ = nonce.partition(".")
    try:
        return int(issued_hex, 16)
    except ValueError:
        return None


def _same_resource(signed: str, requested: str) -> bool:
    """Whether a digest's ``uri`` names the request's URI: the same, but for the case of the scheme
    and host and the URI's parameters (``;transport=udp``)."""

    def core(uri: str) -> str:
        base = uri.strip().split(";", 1)[0].split("?", 1)[0]
        scheme, _, rest = base.partition(":")
        user, at, host = rest.rpartition("@")
        return f"{scheme.lower()}:{user}{at}{host.lower()}"

    return core(signed) == core(requested)
