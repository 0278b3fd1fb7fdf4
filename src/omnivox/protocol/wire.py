"""Parsing WebSocket text frames into pydantic messages, with errors as data.

Every protocol module defines a discriminated union of client messages; ``parse`` turns a raw frame
into one of them or raises the ``OmnivoxError`` that says exactly what was wrong.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from omnivox.core.errors import InvalidJson, InvalidMessage, MessageTooLarge, UnknownMessageType

T = TypeVar("T")


class _Receiver(Protocol):
    async def receive(self) -> Any: ...


async def frames(ws: _Receiver) -> AsyncIterator[str | bytes]:
    """The frames an ASGI WebSocket receives (text or bytes), until the peer disconnects."""
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        yield text if text is not None else (message.get("bytes") or b"")


class Msg(BaseModel):
    """Base of every wire message: unknown fields are ignored, so newer clients keep working."""

    model_config = ConfigDict(extra="ignore")

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


def known_types(adapter: TypeAdapter[Any]) -> frozenset[str]:
    """The ``type`` tags a discriminated-union adapter accepts (its top-level members only)."""
    mapping = adapter.json_schema().get("discriminator", {}).get("mapping", {})
    if not mapping:
        raise ValueError("known_types needs a union discriminated on 'type'")
    return frozenset(mapping)


def parse(
    adapter: TypeAdapter[T],
    raw: str | bytes,
    *,
    max_bytes: int,
    tags: frozenset[str],
    aliases: Mapping[str, str] | None = None,
) -> T:
    """Parse one frame. Raises MessageTooLarge, InvalidJson, UnknownMessageType or InvalidMessage.

    ``aliases`` maps other names of a type (an older protocol version's) to the one in ``tags``.
    Errors carry the frame's ``event_id`` (when it has one) in their details, for protocols that
    name the event an error is about."""
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode())
    if size > max_bytes:
        raise MessageTooLarge(f"message of {size} bytes exceeds the limit of {max_bytes}", limit=max_bytes)
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidJson(f"message is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidMessage("message must be a JSON object with a 'type' field")
    ref = {"event_id": data["event_id"]} if isinstance(data.get("event_id"), str) else {}
    kind = data.get("type")
    if not isinstance(kind, str):
        raise InvalidMessage("message has no string 'type' field", param="type", **ref)
    if aliases and kind in aliases:
        kind = data["type"] = aliases[kind]
    if kind not in tags:
        raise UnknownMessageType(f"unknown message type {kind!r}", param="type", known=sorted(tags), **ref)
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        errors = exc.errors()
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'][1:]) or 'message'}: {err['msg']}" for err in errors
        )
        first = ".".join(str(p) for p in errors[0]["loc"][1:]) if errors else ""
        raise InvalidMessage(f"invalid {kind!r} message: {problems}", param=first or None, **ref) from None
