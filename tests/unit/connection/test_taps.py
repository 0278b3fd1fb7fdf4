"""Taps see every frame, in order, off the relay's path: a slow tap never slows the relay."""

from __future__ import annotations

import asyncio

from omnivox.connection.taps import Direction, Frame, Taps


class Recorder:
    def __init__(self, delay_s: float = 0.0) -> None:
        self.frames: list[Frame] = []
        self.delay_s = delay_s

    async def see(self, frame: Frame) -> None:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        self.frames.append(frame)


class Broken:
    async def see(self, frame: Frame) -> None:
        raise RuntimeError("tap bug")


def frame(n: int, direction: Direction = Direction.TO_CLIENT) -> Frame:
    return Frame(direction, float(n), f"f{n}")


async def test_each_tap_sees_both_directions_in_order() -> None:
    a, b = Recorder(), Recorder()
    taps = Taps([a, b])
    taps.start()
    sent = [frame(i, Direction.TO_WORKER if i % 2 else Direction.TO_CLIENT) for i in range(20)]
    for f in sent:
        taps.see(f)
    await taps.close()
    assert a.frames == sent and b.frames == sent


async def test_a_slow_tap_drops_frames_instead_of_slowing_the_relay() -> None:
    slow, fast = Recorder(delay_s=0.05), Recorder()
    taps = Taps([slow, fast], limit=10)
    taps.start()
    for i in range(1000):
        taps.see(frame(i))  # never awaits, whatever the taps do
        if i % 5 == 4:
            await asyncio.sleep(0)  # the relay's own pace: the fast tap keeps up with it
    await taps.close(timeout_s=0.2)
    assert len(fast.frames) == 1000  # the fast tap saw everything
    # the slow one saw a few, at most `limit` were still queued when it was stopped, and every
    # other frame was dropped for it (and counted), not waited for
    assert 1000 - 10 <= len(slow.frames) + taps.dropped <= 1000
    assert taps.dropped > 900
    assert slow.frames == sorted(slow.frames, key=lambda f: f.at)  # what it saw is in order


async def test_a_failing_tap_neither_stops_the_others_nor_itself() -> None:
    ok = Recorder()
    taps = Taps([Broken(), ok])
    taps.start()
    for i in range(3):
        taps.see(frame(i))
    await taps.close()
    assert len(ok.frames) == 3


async def test_close_without_start_or_taps_is_fine() -> None:
    await Taps().close()
    taps = Taps([Recorder()])
    taps.see(frame(0))
    await taps.close()
