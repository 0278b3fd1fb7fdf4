"""Outputs of asynchronous function calls: each starts a response that uses it, once.

A function the reply did not wait for (``worker.realtime.server_tools``) is answered whenever the
client has its result (``function_call_output``). That output is in the conversation from then on,
so whichever response is planned next reads it; it only needs a response to happen:

- when nothing is being said and the user is not speaking, one starts at once;
- while a reply speaks (or the user talks), it waits; a reply planned meanwhile (the user's turn
  after a barge-in, the client's ``response.create``) reads the output and takes it (``taken``),
  so it is never answered twice; one still waiting when the session is quiet again starts its own.

The wait is a work unit that looks every ``POLL_S`` while outputs wait (the agent's idle prompt
checks the same two conditions before it speaks).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from omnivox.agent.loop import VoiceAgent
from omnivox.agent.reply import ReplyPlan
from omnivox.connection.units import WorkUnits
from omnivox.core.errors import ActiveResponse

log = logging.getLogger(__name__)

UNIT = "async_outputs"
POLL_S = 0.05


class AsyncOutputs:
    def __init__(self, agent: VoiceAgent, units: WorkUnits, plan: Callable[[], ReplyPlan]) -> None:
        self.agent = agent
        self.units = units
        self.plan = plan  # a response to the conversation as it is (the session's defaults)
        self.waiting: list[str] = []  # call ids whose outputs no response has read yet

    async def arrived(self, call_id: str) -> None:
        """The output of asynchronous call ``call_id`` is in the conversation."""
        self.waiting.append(call_id)
        if not self.units.running(UNIT):
            await self.units.start(UNIT, self._deliver())

    def taken(self) -> None:
        """A response was planned: it reads every output in the conversation."""
        self.waiting.clear()

    async def _deliver(self) -> None:
        while self.waiting:
            agent = self.agent
            if not agent.replying and not agent.in_turn:
                try:
                    await agent.respond(self.plan)  # its plan takes the outputs
                except ActiveResponse:
                    pass  # a reply began meanwhile: it has read them, or the next will
                else:
                    log.debug("an asynchronous call's output started a response")
            await asyncio.sleep(POLL_S)
