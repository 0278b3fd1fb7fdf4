"""Who may do what at the gateway: three roles, each with its key, and which browser pages may ask.

- client: sessions (every WebSocket protocol);
- admin: the admin API (workers, queue, sessions, recordings; metrics when ``metrics_need_admin``);
- worker: registration and heartbeats (and the gateway's own connections to workers, which the
  worker checks with the same key).

``api_key`` alone guards every role. How a key travels: ``core.keys``.

Origins: a browser says which page opened a WebSocket or posted a form (``Origin``). Only the
gateway's own pages and ``allowed_origins`` may; requests without an ``Origin`` (not from a browser
page: SDKs, curl, workers) are not affected by it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal
from urllib.parse import urlsplit

from fastapi import HTTPException, Request

from omnivox.core.config import Settings
from omnivox.core.errors import Unauthorized
from omnivox.core.keys import key_matches, offered_key

__all__ = ["Role", "allowed", "offered_key", "origin_allowed", "require", "require_same_origin"]

Role = Literal["client", "admin", "worker"]


def allowed(settings: Settings, role: Role, offered: str | None) -> bool:
    key = settings.key_for(role)
    return key is None or key_matches(offered, key)


def origin_allowed(settings: Settings, headers: Mapping[str, str], scheme: str = "http") -> bool:
    """A request from no browser page, or from the gateway's own pages, or an allowed origin."""
    origin = headers.get("origin")
    if origin is None:
        return True
    if origin in settings.allowed_origins or "*" in settings.allowed_origins:
        return True
    parts = urlsplit(origin)
    return bool(parts.netloc) and parts.netloc == headers.get("host", "")


def require(role: Role) -> Callable[[Request], None]:
    """A route dependency: the request carries the role's key (when one is configured)."""

    def check(request: Request) -> None:
        settings: Settings = request.app.state.ctx.settings
        if not allowed(settings, role, offered_key(request.headers)):
            err = Unauthorized(f"this needs the {role} key (Authorization: Bearer <key>)")
            raise HTTPException(err.http_status, detail={"code": err.code, "message": err.message})

    return check


def require_same_origin(request: Request) -> None:
    """A state-changing route a cross-site page must not reach (forms post cross-site freely)."""
    if not origin_allowed(request.app.state.ctx.settings, request.headers):
        raise HTTPException(
            403, detail={"code": "origin_not_allowed", "message": "this origin may not use this gateway"}
        )
