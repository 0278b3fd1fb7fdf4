"""The store's scripts: ``scheduler.lua`` with its constants prepended from their source of truth
(task types, the worker state table, which sessions hold a pipeline slot), and ``shared.lua`` (keys,
limits, calls); loaded once per server and re-sent by the client library when a restarted server no
longer knows them."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from omnivox.gateway.cluster.connection import RedisConnectionError, aioredis, reaching
from omnivox.gateway.scheduling.pool import PIPELINE_ENGINE, SLOTTED_TASKS, UNTAKEN_ASSIGNMENT_S
from omnivox.gateway.scheduling.states import TRANSITIONS
from omnivox.protocol.control.workers import TASKS


def _lua(value: Any) -> str:
    """A Lua literal: strings, numbers, booleans, lists (arrays) and dicts (tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid Lua string literal for these names
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "{" + ", ".join(_lua(v) for v in value) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{_lua(k)}] = {_lua(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no Lua literal for {value!r}")


def prelude(alpha: float) -> str:
    """The script's constants, from the Python side's definitions."""
    constants = {
        "TASKS": list(TASKS),
        "CAP": {task: cap for task, (_, cap) in TASKS.items()},
        "BUSY": {task: state.value for task, (state, _) in TASKS.items()},
        "SLOTTED": {task: True for task in sorted(SLOTTED_TASKS)},
        "PIPELINE": PIPELINE_ENGINE,
        "TRANS": {s.value: {t.value: True for t in sorted(targets)} for s, targets in TRANSITIONS.items()},
        "ALPHA": float(alpha),
        "UNTAKEN_MS": round(UNTAKEN_ASSIGNMENT_S * 1000),
    }
    return "".join(f"local {name} = {_lua(value)}\n" for name, value in constants.items())


# the operations of shared.lua (every other one is scheduler.lua's)
SHARED_OPS = frozenset(
    {
        "mint_key",
        "take_key",
        "admit_client",
        "leave_client",
        "reassert_clients",
        "hold_calls",
        "drop_call",
        "find_call",
        "media_secret",
    }
)


# every script's first lines: the key prefix, the operation, the time (ms; the server's when the
# caller gives -1) and the operation's arguments
HEADER = """local P = KEYS[1]
local OP = ARGV[1]
local NOW = tonumber(ARGV[2])
if NOW < 0 then
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local A = {}
for i = 3, #ARGV do A[#A + 1] = ARGV[i] end
"""


def _source(name: str) -> str:
    return HEADER + resources.files("omnivox.gateway.cluster").joinpath(name).read_text()


def scheduler_source(alpha: float) -> str:
    return prelude(alpha) + _source("scheduler.lua")


def shared_source() -> str:
    return _source("shared.lua")


class Scripts:
    """One script on one client, under one key prefix."""

    def __init__(self, client: aioredis.Redis, prefix: str, source: str) -> None:
        self.client = client
        self.prefix = prefix
        self._script = client.register_script(source)

    async def call(self, op: str, now_ms: int, *args: str | int | float) -> Any:
        """Run ``op``; raises ``StoreUnavailable`` when the store cannot be reached.

        A connection that broke (a restarted server closed it) is tried once more on a new one:
        every operation is safe to send twice (an enqueue by its ticket id, the rest by design)."""
        async with reaching(op):
            try:
                return await self._script(keys=[self.prefix], args=[op, now_ms, *args])
            except RedisConnectionError:
                return await self._script(keys=[self.prefix], args=[op, now_ms, *args])
