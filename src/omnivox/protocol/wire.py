"""Parsing WebSocket text frames into pydantic messages, with errors as data.

Every protocol module defines a discriminated union of client messages; ``parse`` turns a raw frame
into one of them or raises the ``OmnivoxError`` that says exactly what was wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from omnivox.core.errors import InvalidJson, InvalidMessage, MessageTooLarge, UnknownMessageType

T = TypeVar("T")

MAX_DEPTH = 64  # nesting of a message (a tool's JSON schema nests; nothing real nests this deep)
_SURROGATE = re.compile("[\ud800-\udfff]")


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
    data = load_json(raw)
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
        problems = "; ".join(f"{error_path_of(err, data) or 'message'}: {err['msg']}" for err in errors)
        first, _ = error_path(exc, data)
        raise InvalidMessage(f"invalid {kind!r} message: {problems}", param=first or None, **ref) from None


def load_json(raw: str | bytes) -> Any:
    """JSON from a peer, of the shape ``check_shape`` allows. Raises InvalidJson or InvalidMessage
    (never RecursionError, whatever the nesting)."""
    try:
        data = json.loads(raw)
    except RecursionError:
        raise InvalidMessage(f"message is nested more than {MAX_DEPTH} levels deep") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, or an integer of 4300+ digits
        raise InvalidJson(f"message is not valid JSON: {exc}") from None
    check_shape(data)
    return data


def check_shape(data: Any) -> None:
    """Refuse what no message needs and what would break later code: nesting past ``MAX_DEPTH``,
    and lone UTF-16 surrogates (``"\\ud800"`` decodes to a string no UTF-8 encoder accepts)."""
    stack: list[tuple[Any, int, str]] = [(data, 1, "")]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, str):
            # (an ASCII string holds none, and says so at no cost: an append's base64 is not scanned)
            if not node.isascii() and _SURROGATE.search(node):
                raise InvalidMessage(
                    "message text holds a lone UTF-16 surrogate, which is not a character",
                    param=path or None,
                )
            continue
        if depth > MAX_DEPTH:
            raise InvalidMessage(f"message is nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, dict):
            for key, value in node.items():
                child = f"{path}.{key}" if path else key
                if not key.isascii() and _SURROGATE.search(key):
                    raise InvalidMessage("a key holds a lone UTF-16 surrogate", param=path or None)
                stack.append((value, depth + 1, child))
        elif isinstance(node, list):
            stack.extend((v, depth + 1, f"{path}.{i}" if path else str(i)) for i, v in enumerate(node))


def error_path_of(err: ErrorDetails, data: Any) -> str:
    """The dotted path of the input an error is about, as the client wrote it.

    pydantic's ``loc`` also names the union members it tried (``str``, ``list[...]``, a tagged
    union's tag); only the parts that index into the client's own data are kept."""
    tag = data.get("type") if isinstance(data, dict) else None
    loc = err["loc"][1:] if err["loc"] and err["loc"][0] == tag else err["loc"]
    parts: list[str] = []
    node: Any = data
    for i, part in enumerate(loc):
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif i == len(loc) - 1 and err["type"] == "missing" and isinstance(part, str):
            pass  # a missing field: named, though absent
        else:
            continue  # a union member's name, not the client's
        parts.append(str(part))
    return ".".join(parts)


def error_path(exc: ValidationError, data: Any) -> tuple[str, ErrorDetails]:
    """The most specific error of ``exc`` (the deepest path into the client's data) and its path."""
    errors = exc.errors()
    paths = [(error_path_of(err, data), err) for err in errors]
    return max(paths, key=lambda p: len(p[0].split(".")) if p[0] else 0)
