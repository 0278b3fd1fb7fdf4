"""Every wire protocol omnivox serves, found by name."""

from __future__ import annotations

import pytest

from omnivox.protocol.control.workers import TASKS
from omnivox.protocol.duplex import DUPLEX
from omnivox.protocol.realtime.wire import REALTIME
from omnivox.protocol.registry import PROTOCOLS, by_name
from omnivox.protocol.spec import WireProtocol
from omnivox.protocol.streaming import STREAMING


def test_the_protocols_served():
    assert set(PROTOCOLS) == {STREAMING, DUPLEX, REALTIME}
    assert all(isinstance(p, WireProtocol) for p in PROTOCOLS)


def test_names_gateway_paths_and_worker_paths_are_unique():
    assert len({p.name for p in PROTOCOLS}) == len(PROTOCOLS)
    assert len({p.path for p in PROTOCOLS}) == len(PROTOCOLS)
    worker_paths = [path for p in PROTOCOLS for path in p.worker_paths]
    assert len(set(worker_paths)) == len(worker_paths)


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.name)
def test_each_protocol_is_complete(protocol):
    assert by_name(protocol.name) is protocol
    assert protocol.scope in ("session", "turn")
    assert protocol.path.startswith("/") and all(p.startswith("/") for p in protocol.worker_paths)
    assert "{session_id}" in protocol.worker_paths[-1]  # the last worker path takes the session id
    assert protocol.task_type("s1", {}) in TASKS  # the pool knows what it asks for
    assert protocol.parser.tags  # it parses something


def test_unknown_name():
    with pytest.raises(KeyError, match="telepathy"):
        by_name("telepathy")
    with pytest.raises(KeyError):
        by_name("")
