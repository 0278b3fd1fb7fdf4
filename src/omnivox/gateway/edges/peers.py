"""The other gateways sharing this one's store, as the edges meet them: which gateway holds a WebRTC
call (a sideband or a hang-up that lands here is passed on to it), and which gateways to ask for
their sessions. One gateway alone has no peers (``NoPeers``); gateways on a Redis store do
(``cluster.peers``)."""

from __future__ import annotations

from typing import Protocol


class Peers(Protocol):
    async def call_owner(self, call_id: str) -> str | None:
        """The base URL of the other gateway holding ``call_id`` (None: no other gateway does)."""
        ...

    def call_started(self, call_id: str) -> None:
        """This gateway holds a new call (other gateways pass its sidebands here)."""
        ...

    def call_ended(self, call_id: str) -> None: ...

    async def others(self) -> list[tuple[str, str]]:
        """(gateway id, base URL) of the other live gateways."""
        ...


class NoPeers:
    async def call_owner(self, call_id: str) -> str | None:
        return None

    def call_started(self, call_id: str) -> None:
        pass

    def call_ended(self, call_id: str) -> None:
        pass

    async def others(self) -> list[tuple[str, str]]:
        return []
