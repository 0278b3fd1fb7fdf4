"""Identifiers: short, random, URL-safe, prefixed by what they name."""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"
