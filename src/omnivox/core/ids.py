"""Identifiers: short, random, URL-safe, prefixed by what they name."""

from __future__ import annotations

import re
import secrets

from omnivox.core.errors import InvalidSessionId

# what a client may call its session: it goes into URLs, logs and (with recording) directory names
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def check_session_id(session_id: str) -> str:
    """``session_id`` if it is safe to use anywhere (1-128 of ``A-Za-z0-9_.:-``, not starting with
    punctuation), else ``InvalidSessionId``."""
    if not _SESSION_ID.fullmatch(session_id):
        raise InvalidSessionId(
            "a session id is 1 to 128 characters of letters, digits and _ . : - (starting with a "
            "letter or digit)"
        )
    return session_id
