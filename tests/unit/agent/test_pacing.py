"""Pacing: a streaming client's lead over real time, and a duplex client's unit at a time."""

from __future__ import annotations

import asyncio

import numpy as np

from omnivox.agent.pacing import LeadPacing, UnitPacing
from omnivox.agent.playout import Playback


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_lead_pacing_waits_while_the_audio_sent_runs_that_far_ahead() -> None:
    clock = Clock()
    playback = Playback(clock)
    cut = asyncio.Event()
    pacing = LeadPacing(lead_ms=200)
    assert await pacing.room(playback, 2400, cut) == 2400  # nothing played yet: no wait
    playback.send(np.zeros(4800, np.float32), 24000)  # 200 ms
    async with asyncio.timeout(1):
        assert await pacing.room(playback, 2400, cut) == 2400  # 200 ahead: at the lead, no wait
    playback.send(np.zeros(24000, np.float32), 24000)  # 1.2 s ahead of a clock that stands still
    waiting = asyncio.create_task(pacing.room(playback, 2400, cut))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    cut.set()  # a cut reply waits for nothing
    assert await asyncio.wait_for(waiting, 1) == 2400


async def test_unit_pacing_lets_out_what_a_unit_grants_and_no_more() -> None:
    pacing = UnitPacing()
    playback = Playback(Clock())
    cut = asyncio.Event()
    sent: list[int] = []

    async def reply() -> None:  # frames of 1000 samples, as fast as it is let
        while True:
            sent.append(await pacing.room(playback, 1000, cut))

    task = asyncio.create_task(reply())
    await asyncio.sleep(0.01)
    assert sent == [] and pacing.starved  # audio to say, no grant yet
    await pacing.grant(2500, idle=lambda: False, wait_s=1)
    assert sent == [1000, 1000, 500]  # the unit's last frame is cut at its end
    await pacing.grant(1200, idle=lambda: False, wait_s=1)
    assert sent[3:] == [1000, 200]
    task.cancel()


async def test_a_grant_returns_at_once_when_the_reply_has_nothing_ready() -> None:
    pacing = UnitPacing()
    async with asyncio.timeout(0.5):
        await pacing.grant(24000, idle=lambda: True, wait_s=5)  # waiting for the models: nothing to say
