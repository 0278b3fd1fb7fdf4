"""``semantic_vad`` over a live stream: when a pause has run long enough, ask the end-of-turn model
about the user's audio and let the policy say how long this pause must last.

The listener owns the stream and the VAD turn detector; for each pause it asks ``due`` and, once it
is, calls ``score`` with the turn's audio so far (the model looks at its last 8 s) and applies the
decision's ``required_ms`` to the detector. One pause is scored once: the words cannot change while
nobody speaks. The model is asked when the pause has lasted half of the shortest pause that could
end the turn (``sure_ms / 2``: 100 ms at high eagerness, 125 medium, 250 low), so its answer (about
50-150 ms of CPU) is there before that shortest pause is over; a stop consonant's gap inside a word
rarely lasts that long. The words flushed from the recogniser at that pause, when there are any,
are weighed with the model's probability (``voice.turn.words``, ``SemanticTurnPolicy.tier``).

Everything is in stream audio time, so the same audio gives the same decisions however fast it
arrives (tests assert on ``scores``, never on wall-clock times).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from omnivox.voice.turn.base import EndOfTurnModel
from omnivox.voice.turn.policy import SemanticTurnPolicy
from omnivox.voice.turn.words import words_complete


@dataclass(frozen=True)
class TurnScore:
    """One pause, judged."""

    at_ms: float  # stream time of the judgement (the end of the window that made the pause due)
    pause_ms: float  # how long the pause had lasted then
    probability: float  # the model's P(the turn is over)
    required_ms: float  # how long this pause must last to end the turn
    tier: str  # "sure", "finished" or "max_pause" (the model or the words say not finished)
    model_s: float  # wall time of the model call (for measurements)
    text: str = ""  # the words heard up to the pause ("" : none, or no recogniser)
    words_complete: bool | None = None  # whether they read as finished (None: they cannot tell)


class SemanticTurn:
    """An end-of-turn model and the eagerness policy, over the pauses of one stream."""

    def __init__(self, model: EndOfTurnModel, policy: SemanticTurnPolicy, use_words: bool = True) -> None:
        self.model = model
        self.policy = policy
        self.use_words = use_words  # False: the model alone (the words are not weighed)
        self.probe_ms = policy.sure_ms / 2
        self.scores: list[TurnScore] = []  # every pause judged since the listener began
        self._scored_pause: float | None = None  # start of the pause judged last

    @classmethod
    def for_eagerness(cls, model: EndOfTurnModel, eagerness: str, use_words: bool = True) -> SemanticTurn:
        return cls(model, SemanticTurnPolicy.for_eagerness(eagerness), use_words)

    @property
    def max_ms(self) -> float:
        """The longest pause inside a turn: the detector's own silence length until a pause is judged."""
        return self.policy.max_ms

    def due(self, pause_started_ms: float | None, pause_ms: float) -> bool:
        """Whether the current pause (started at ``pause_started_ms``) should be judged now."""
        return (
            pause_started_ms is not None
            and pause_started_ms != self._scored_pause
            and pause_ms >= self.probe_ms
        )

    def probability(self, audio_16k: np.ndarray) -> tuple[float, float]:
        """The model's P(the turn is over) on ``audio_16k`` (the turn up to now), and the seconds it
        took: for ``score``, when the model is asked before the words are in."""
        began = time.perf_counter()
        probability = self.model.probability_finished(audio_16k)
        return probability, time.perf_counter() - began

    def score(
        self,
        audio_16k: np.ndarray,
        pause_started_ms: float,
        now_ms: float,
        text: str = "",
        judged: tuple[float, float] | None = None,
    ) -> TurnScore:
        """Judge the pause that began at ``pause_started_ms``: ``audio_16k`` is the turn up to now,
        ``text`` its words so far ("" when there is no recogniser's word on them); ``judged``:
        the model's answer on that audio already (``probability``), so it is not asked again."""
        probability, spent = judged if judged is not None else self.probability(audio_16k)
        pause_ms = now_ms - pause_started_ms
        complete = words_complete(text) if self.use_words else None
        tier = self.policy.tier(probability, complete)
        required = self.policy.required_pause_ms(probability, complete)
        result = TurnScore(now_ms, pause_ms, probability, required, tier, spent, text, complete)
        self.scores.append(result)
        self._scored_pause = pause_started_ms
        return result
