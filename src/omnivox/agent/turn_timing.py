"""The hearing's side of a turn's breakdown (``agent.breakdown``): when the agent noticed the pause
that ended the turn, when the turn was decided and when its final transcript was ready.

The agent tells it, on the event loop, where the listener's pause began after each chunk it heard
(``chunk``) and what turn-taking made of each thing heard (``heard``). The turn's end comes as a
``CommitTurn`` with the time the speech ended; a reply to it names that same time
(``ReplyPlan.speech_end_at``), so ``fill`` gives a reply the stages of the turn it answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from omnivox.agent.breakdown import StageTimes
from omnivox.agent.turns import Action, CommitTurn
from omnivox.voice.listener import Heard

KEEP = 4  # turns remembered: a reply answers one of the last few (a backlog's owed turn)


class TurnTimer:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._pause: tuple[float, float] | None = None  # (where in the audio it began, noticed at)
        self._decided: tuple[float, float] | None = None  # (where the speech ended, decided at)
        self._noticed: float | None = None
        self._turns: list[StageTimes] = []  # the last turns that ended, by their speech's end

    def chunk(self, pause_started_ms: float | None) -> None:
        """A chunk was heard; the listener's pause (if one runs) began at ``pause_started_ms``."""
        if pause_started_ms is not None and (self._pause is None or self._pause[0] != pause_started_ms):
            self._pause = (pause_started_ms, self.clock())

    def heard(self, heard: Heard, actions: Sequence[Action]) -> None:
        """What the listener heard, and what turn-taking made of it."""
        if heard.kind == "speech_stopped":
            pause = self._pause
            # the pause that ended the turn was seen in an earlier chunk, or in this very one
            self._noticed = pause[1] if pause is not None and pause[0] == heard.audio_ms else heard.at
            self._decided = (heard.audio_ms, heard.at)
            self._pause = None
        elif heard.kind == "final":
            commit = next((a for a in actions if isinstance(a, CommitTurn)), None)
            decided, self._decided = self._decided, None
            if commit is None or commit.speech_end_at is None or decided is None:
                return
            times = StageTimes(commit.speech_end_at, self._noticed, decided[1], heard.at)
            self._turns = [*self._turns[-(KEEP - 1) :], times]

    def turn(self, speech_end_at: float | None) -> StageTimes | None:
        """The hearing's stages of the turn whose speech ended at ``speech_end_at`` (None: no turn of
        the last few)."""
        return next(
            (t for t in self._turns if speech_end_at is not None and t.speech_end == speech_end_at), None
        )

    def fill(self, speech_end_at: float | None, times: StageTimes) -> None:
        """Give a reply's ``times`` the hearing's stages of the turn whose speech ended at
        ``speech_end_at`` (nothing when no turn of those prompted it)."""
        if (turn := self.turn(speech_end_at)) is not None:
            times.hearing_from(turn)
