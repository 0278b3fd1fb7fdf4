"""Time sources, injectable so schedulers and queues can be tested without sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]

monotonic: Clock = time.monotonic
wall: Clock = time.time


def elapsed_ms(start: float, clock: Clock = monotonic) -> float:
    return round((clock() - start) * 1000.0, 3)
