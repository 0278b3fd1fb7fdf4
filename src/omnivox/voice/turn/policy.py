"""OpenAI's ``semantic_vad`` turn detection as a pure policy: a pause and a model's judgement in, a
decision out.

OpenAI Realtime's ``turn_detection: {type: "semantic_vad", eagerness}`` ends the user's turn sooner
when a model thinks they have finished and later when it thinks they have not; ``eagerness`` ("low",
"medium", "high", "auto" = "medium") sets how soon, and the longest it waits is 8 s, 4 s and 2 s. The
policy here has three pause lengths per eagerness, by how sure the end-of-turn model is:

- ``sure_ms``: the model is sure the turn is over (probability >= ``sure``): end after this pause;
- ``finished_ms``: the model says finished (probability >= ``threshold``): end after this pause;
- ``max_ms``: the model says not finished, or has not answered yet: end only after this pause (the
  user may have stopped for good although the words sound unfinished).

The "sure" and "finished" pauses are sglang-omni's immediate and confident silence thresholds
(low 500 / 1200 ms, medium 250 / 640 ms, high 200 / 320 ms); the longest waits are OpenAI's (8 / 4 /
2 s), since omnivox serves the Realtime API. ``decide`` is a pure function of the pause so far and the
latest probability, so it is tested without a model and gives the same answer however fast audio
arrives; ``TurnDecision.wait_ms`` says how much longer the pause must last for the turn to end, so a
caller can also schedule the check rather than poll.

The words, when there are any (``voice.turn.words``), are the second witness: words that stop on
"for", "to", "could" or trail off ask for the longest pause whatever the tune (a fragment said with
a falling, final-sounding cadence); a few words ending on a content word ask for at least the
"finished" pause although the model heard no end (a flat voice, a telephone line: smart-turn gives
espeak-ng's complete questions 0.01-0.02). The model alone still decides the "sure" tier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Eagerness = Literal["low", "medium", "high", "auto"]


@dataclass(frozen=True)
class TurnDecision:
    finished: bool  # the turn is over now
    required_ms: float  # the pause this probability asks for
    wait_ms: float  # how much longer the pause must go on (0 once finished)
    reason: str  # "sure", "finished", "max_pause" or "waiting"


@dataclass(frozen=True)
class SemanticTurnPolicy:
    """Required pause by end-of-turn probability; see the module docstring."""

    sure_ms: float
    finished_ms: float
    max_ms: float
    threshold: float = 0.5  # smart-turn's own decision boundary
    sure: float = 0.9

    def __post_init__(self) -> None:
        if not 0 <= self.sure_ms <= self.finished_ms <= self.max_ms:
            raise ValueError("pauses must satisfy 0 <= sure_ms <= finished_ms <= max_ms")
        if not 0.0 < self.threshold <= self.sure <= 1.0:
            raise ValueError("probabilities must satisfy 0 < threshold <= sure <= 1")

    @classmethod
    def for_eagerness(cls, eagerness: str = "auto") -> SemanticTurnPolicy:
        """The policy for OpenAI's ``eagerness`` ("low", "medium", "high", "auto")."""
        try:
            return EAGERNESS[eagerness]
        except KeyError:
            raise ValueError(f"eagerness must be one of {', '.join(EAGERNESS)}, got {eagerness!r}") from None

    def tier(self, probability: float | None, words_complete: bool | None = None) -> str:
        """ "sure", "finished" or "max_pause": which pause ``probability`` asks for, given whether
        the words read as finished (``words_complete``; None: no words, or they cannot tell)."""
        if words_complete is False:
            return "max_pause"
        if probability is None or probability < self.threshold:
            return "finished" if words_complete else "max_pause"
        return "sure" if probability >= self.sure else "finished"

    def required_pause_ms(self, probability: float | None, words_complete: bool | None = None) -> float:
        """How long a pause ends the turn, given the model's latest probability (None: no answer)
        and the words' verdict."""
        return {"sure": self.sure_ms, "finished": self.finished_ms, "max_pause": self.max_ms}[
            self.tier(probability, words_complete)
        ]

    def decide(
        self, pause_ms: float, probability: float | None, words_complete: bool | None = None
    ) -> TurnDecision:
        """Whether a pause of ``pause_ms`` (so far) ends the turn, given the model's probability that
        the user has finished (None while the model has not answered) and the words' verdict."""
        required = self.required_pause_ms(probability, words_complete)
        if pause_ms >= required:
            return TurnDecision(True, required, 0.0, self.tier(probability, words_complete))
        return TurnDecision(False, required, required - pause_ms, "waiting")

    def is_turn_over(
        self, pause_ms: float, probability: float | None, words_complete: bool | None = None
    ) -> bool:
        return self.decide(pause_ms, probability, words_complete).finished


EAGERNESS: dict[str, SemanticTurnPolicy] = {
    "low": SemanticTurnPolicy(sure_ms=500, finished_ms=1200, max_ms=8000),
    "medium": SemanticTurnPolicy(sure_ms=250, finished_ms=640, max_ms=4000),
    "high": SemanticTurnPolicy(sure_ms=200, finished_ms=320, max_ms=2000),
}
EAGERNESS["auto"] = EAGERNESS["medium"]
