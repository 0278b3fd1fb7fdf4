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
    punctuation, no ``..``), else ``InvalidSessionId``. The same shape a recording's directory may
    have: a session the server records is never one it cannot record."""
    if not _SESSION_ID.fullmatch(session_id) or ".." in session_id:
        raise InvalidSessionId(
            "a session id is 1 to 128 characters of letters, digits and _ . : - (starting with a "
            "letter or digit, without '..')"
        )
    return session_id
