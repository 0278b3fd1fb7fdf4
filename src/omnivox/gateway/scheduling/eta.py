"""Queue wait estimates: per-task-type durations and a min-heap over workers' remaining time.

Durations start from baselines and switch to an exponential moving average of measured durations
once enough samples exist (as in the MiniCPM-o demo). The estimate for the whole queue is one pass:
each ticket, in order, takes the worker that frees up first.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

BASELINE_S: dict[str, float] = {
    "streaming": 20.0,
    "audio_duplex": 120.0,
    "omni_duplex": 90.0,
    "realtime": 120.0,
}
DEFAULT_BASELINE_S = 60.0


@dataclass
class DurationModel:
    alpha: float = 0.3
    min_samples: int = 3
    _ema: dict[str, float] = field(default_factory=dict)
    _samples: dict[str, int] = field(default_factory=dict)

    def observe(self, task_type: str, seconds: float) -> None:
        n = self._samples.get(task_type, 0) + 1
        self._samples[task_type] = n
        prev = self._ema.get(task_type)
        self._ema[task_type] = seconds if prev is None else self.alpha * seconds + (1 - self.alpha) * prev

    def expected(self, task_type: str) -> float:
        if self._samples.get(task_type, 0) >= self.min_samples:
            return self._ema[task_type]
        return BASELINE_S.get(task_type, DEFAULT_BASELINE_S)

    def samples(self, task_type: str) -> int:
        return self._samples.get(task_type, 0)


class WaitPlan:
    """Tickets placed in queue order on the workers that free up first (a min-heap of free times).

    ``add`` places one more ticket at the tail in O(log workers), so a long queue's estimates can
    grow as tickets arrive instead of being recomputed.
    """

    def __init__(self, remaining_s: Iterable[float], model: DurationModel) -> None:
        self.model = model
        self.heap = [max(0.0, r) for r in remaining_s]
        heapq.heapify(self.heap)
        self._serial_total = 0.0  # with no usable worker: the baselines, one after another

    def add(self, task_type: str) -> float:
        if not self.heap:
            wait = self._serial_total
            self._serial_total += self.model.expected(task_type)
            return wait
        start = heapq.heappop(self.heap)
        heapq.heappush(self.heap, start + self.model.expected(task_type))
        return start


def estimate_waits(
    remaining_s: Iterable[float], queued_task_types: Iterable[str], model: DurationModel
) -> list[float]:
    """Wait in seconds for each queued ticket, in queue order.

    ``remaining_s`` holds, per usable worker, the seconds until it is expected to be free (0 for idle).
    With no usable worker at all the waits are unknown and reported as the baseline sum in order.
    """
    plan = WaitPlan(remaining_s, model)
    return [plan.add(task) for task in queued_task_types]
