"""Resume tokens: a waiting client's claim on its place in the queue.

The first queue notice a waiting client hears carries a token. If its connection drops, or its
gateway dies, while it waits, its ticket steps out of the line keeping its place
(``SchedulerStore.orphan``; nobody behind it is held up meanwhile), and the client may connect again
within ``resume_grace_s``, to any gateway sharing the store, with ``?resume=<token>``: it takes its
old place back (``SchedulerStore.reattach``). A genuine token whose place is gone (served, expired,
taken back already) just queues the client anew; one no gateway signed is refused.

The token is the ticket id signed with the gateways' secret (the media secret they share on a
store), so a ticket id seen elsewhere (the admin's queue list, a log) takes nobody's place.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from omnivox.core.errors import InvalidResumeToken

_TOKEN = re.compile(r"(?P<ticket>[A-Za-z0-9_-]{1,64})\.(?P<sig>[0-9a-f]{32})")


class ResumeTokens:
    """Signs and checks resume tokens. The secret is random per process until the gateways' shared
    one is known (``use_secret``)."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._key = self._derive(secret or secrets.token_bytes(32))

    def use_secret(self, secret: bytes) -> None:
        self._key = self._derive(secret)

    def make(self, ticket_id: str) -> str:
        return f"{ticket_id}.{self._sign(ticket_id)}"

    def ticket_of(self, token: str) -> str:
        """The ticket a token claims; raises ``InvalidResumeToken`` whatever else it is."""
        match = _TOKEN.fullmatch(token)
        if match is None or not hmac.compare_digest(match["sig"], self._sign(match["ticket"])):
            raise InvalidResumeToken("the resume token is not one this service gave out")
        return match["ticket"]

    def _sign(self, ticket_id: str) -> str:
        return hmac.new(self._key, ticket_id.encode(), hashlib.sha256).hexdigest()[:32]

    @staticmethod
    def _derive(secret: bytes) -> bytes:
        # its own key: a resume token is never also a media link's signature, nor the reverse
        return hashlib.sha256(b"omnivox resume\n" + secret).digest()
