"""Stands in for a realtime session's ``Events`` in unit tests: keeps what is put, in order."""

from __future__ import annotations

from typing import Any


class Recorder:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def put(self, event: Any, **_kw: Any) -> None:
        self.sent.append(event)

    def types(self) -> list[str]:
        return [e.type for e in self.sent]
