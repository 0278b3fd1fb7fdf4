"""The end-of-turn model contract: recent user audio in, the probability that the turn is over out.

A VAD says when the user stops making sound; it cannot tell "I'd like a pizza with..." (a pause
inside a turn) from "I'd like a pizza." (the end of one). An end-of-turn model listens to how the
speech ended (words, intonation, the cut) and says how likely it is that the user has finished. The
cascade asks it once a pause starts and lets ``policy.SemanticTurnPolicy`` weigh the answer against
the length of the pause.

Blocking (model work), like every voice component; one instance serves one stream at a time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class EndOfTurnModel(ABC):
    """Scores whether a speaker has finished their turn."""

    name: str = "end-of-turn"
    sample_rate: int = 16000  # the rate ``probability_finished`` takes

    @abstractmethod
    def probability_finished(self, audio_16k: np.ndarray) -> float:
        """P(the turn is over), in [0, 1], given the user's recent audio (float32 mono at 16 kHz, the
        current turn up to the pause; the model looks at as much of its end as it needs)."""

    def is_finished(self, audio_16k: np.ndarray, threshold: float = 0.5) -> bool:
        return self.probability_finished(audio_16k) >= threshold
