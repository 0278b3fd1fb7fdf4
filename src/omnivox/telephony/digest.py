"""SIP digest authentication, the server side (RFC 3261 section 22, RFC 7616 with MD5 and qop=auth).

Nonces are stateless: an HMAC under a secret this process makes, of the time they were issued,
so a nonce is good for ``NONCE_TTL_S`` and a forged or stale one is refused. Credentials are
compared in constant time, as bytes (a header may hold any character; it is refused, never an
exception).
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

    def _nonce(self, issued: int) -> str:
        tag = hmac.new(self._secret, str(issued).encode(), "sha256").hexdigest()[:32]
        return f"{issued:x}.{tag}"

    def _nonce_ok(self, nonce: str) -> bool:
        issued_hex, _, _ = nonce.partition(".")
        try:
            issued = int(issued_hex, 16)
        except ValueError:
            return False
        fresh = 0 <= self.clock() - issued <= NONCE_TTL_S
        return fresh and hmac.compare_digest(nonce.encode(), self._nonce(issued).encode())

    def challenge(self) -> str:
        """A ``WWW-Authenticate`` header value."""
        nonce = self._nonce(int(self.clock()))
        return f'Digest realm="{self.realm}", nonce="{nonce}", algorithm=MD5, qop="auth"'

    def check(self, method: str, authorization: str | None) -> str | None:
        """The user an ``Authorization`` header proves (None: missing, wrong or stale)."""
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
        return user if hmac.compare_digest(expected.encode(), response.lower().encode()) else None
