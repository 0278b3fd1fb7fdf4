"""Every wire protocol omnivox serves. The gateway mounts each one; a worker those it has handlers for."""

from __future__ import annotations

from omnivox.protocol.duplex import DUPLEX
from omnivox.protocol.realtime.wire import REALTIME
from omnivox.protocol.spec import WireProtocol
from omnivox.protocol.streaming import STREAMING

PROTOCOLS: tuple[WireProtocol, ...] = (STREAMING, DUPLEX, REALTIME)


def by_name(name: str) -> WireProtocol:
    for protocol in PROTOCOLS:
        if protocol.name == name:
            return protocol
    raise KeyError(f"no wire protocol named {name!r}")
