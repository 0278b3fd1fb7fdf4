"""Turn detection on top of VAD probabilities, with the OpenAI Realtime ``server_vad`` parameters.

``TurnDetector`` is pure: it takes one speech probability per VAD window and says when the user
started and stopped speaking, in audio time (milliseconds since the stream began), so it is tested
with synthetic probabilities and gives the same answer however fast audio arrives.

- Speech starts at the first window whose probability reaches ``threshold``.
- While speaking, a window below ``threshold - hysteresis`` starts (or continues) a silence run and a
  window at or above ``threshold`` ends it; in-between windows just let time pass. Silero's own
  segmenter uses the same hysteresis so one soft syllable does not cut a turn.
- Speech stops once the silence run lasts ``silence_duration_ms``. The event is reported then, but it
  says where the speech ended (the start of the silence run), as OpenAI's ``audio_end_ms`` does.
- ``date_pause`` moves the current pause's start earlier, to where the signal's energy fell
  (``voice.vad.energy``: the listener's refinement; Silero's probability holds on 80-110 ms after the
  sound stops): the pause's length, ``silence_duration_ms`` and ``audio_end_ms`` count from there.
- ``require_pause`` changes how long the current pause must last (``semantic_vad``: an end-of-turn
  model has judged the words so far); the next pause starts again from ``silence_duration_ms``.
- ``prefix_padding_ms`` only moves ``audio_start_ms`` earlier: the audio committed as the user's turn
  should begin a little before the VAD fired, because the first phoneme is quiet.

``pause_prediction`` in [0, 1] is how far the current silence run has got towards
``silence_duration_ms``: 0 while the user is speaking, rising linearly through a pause, 1 when the turn
has ended (and while nobody speaks). A cascade can start the LLM speculatively above, say, 0.6 and
commit when the turn really ends, as Unmute does with its STT's pause prediction.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from omnivox.core.errors import IllegalTransition


@dataclass(frozen=True)
class TurnParams:
    """OpenAI ``turn_detection: {type: "server_vad", ...}`` settings, same names and defaults."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    hysteresis: float = 0.15  # not an OpenAI setting: below threshold - hysteresis counts as silence
    # semantic_vad's eagerness (low, medium, high, auto); None: server_vad. With it an end-of-turn
    # model sets each pause's length, and silence_duration_ms is the longest wait (the listener's)
    eagerness: str | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold}")
        if self.prefix_padding_ms < 0 or self.silence_duration_ms <= 0:
            raise ValueError("prefix_padding_ms must be >= 0 and silence_duration_ms > 0")
        if not 0.0 <= self.hysteresis < self.threshold:
            raise ValueError("hysteresis must be in [0, threshold)")
        if self.eagerness not in (None, "low", "medium", "high", "auto"):
            raise ValueError(f"eagerness must be low, medium, high or auto, got {self.eagerness!r}")


class TurnState(enum.Enum):
    SILENCE = "silence"  # nobody is speaking
    SPEECH = "speech"  # the user is speaking (possibly in a short pause)


_ALLOWED = {(TurnState.SILENCE, TurnState.SPEECH), (TurnState.SPEECH, TurnState.SILENCE)}


class TurnEventType(enum.StrEnum):
    SPEECH_STARTED = "speech_started"
    SPEECH_STOPPED = "speech_stopped"


@dataclass(frozen=True)
class TurnEvent:
    type: TurnEventType
    speech_ms: float  # where the speech began (started) or ended (stopped), per the VAD windows
    audio_ms: float  # OpenAI's audio_start_ms (speech_ms minus prefix padding) / audio_end_ms
    detected_ms: float  # audio time at which the detector could say so (end of the deciding window)


class TurnDetector:
    """Speech start / stop events from a sequence of per-window speech probabilities."""

    def __init__(self, params: TurnParams | None = None, window_ms: float = 32.0) -> None:
        if window_ms <= 0:
            raise ValueError("window_ms must be positive")
        self.params = params or TurnParams()
        self.window_ms = window_ms
        self.reset()

    def reset(self) -> None:
        """Back to silence at audio time 0, for a new stream."""
        self.state = TurnState.SILENCE
        self.audio_ms = 0.0  # end of the last window pushed
        self._silence_since: float | None = None  # start of the current silence run while speaking
        self._last_stop_ms = 0.0  # padding never reaches back into the previous turn
        self.required_ms = float(self.params.silence_duration_ms)  # the current pause ends the turn at

    def reset_turn(self) -> None:
        """End the current turn without an event (a manual commit or clear); the clock runs on."""
        if self.state is TurnState.SPEECH:
            self._move(TurnState.SILENCE)
        self._silence_since = None
        self._last_stop_ms = self.audio_ms
        self.required_ms = float(self.params.silence_duration_ms)

    @property
    def pause_started_ms(self) -> float | None:
        """Where the current pause began (None: no pause, or nobody speaking)."""
        return self._silence_since if self.state is TurnState.SPEECH else None

    @property
    def pause_ms(self) -> float:
        """How long the current pause has lasted (0 without one)."""
        started = self.pause_started_ms
        return 0.0 if started is None else self.audio_ms - started

    def date_pause(self, started_ms: float) -> None:
        """The current pause began earlier than the VAD's windows say, at ``started_ms`` (where the
        signal's energy fell: ``voice.vad.energy``): its length, and every timer on it, count from
        there. Only ever earlier, never before the last stop; nothing without a pause."""
        if self.pause_started_ms is None:
            return
        assert self._silence_since is not None
        self._silence_since = min(self._silence_since, max(started_ms, self._last_stop_ms))

    def require_pause(self, ms: float) -> None:
        """The current pause ends the turn once it lasts ``ms`` (at once if it already has, at the
        next window); the next pause starts from ``silence_duration_ms`` again."""
        self.required_ms = float(ms)

    def _move(self, to: TurnState) -> None:
        if (self.state, to) not in _ALLOWED:
            raise IllegalTransition(f"turn detector cannot go from {self.state.value} to {to.value}")
        self.state = to

    @property
    def pause_prediction(self) -> float:
        """0 while speaking, rising to 1 as a pause reaches ``silence_duration_ms``; 1 in silence."""
        if self.state is TurnState.SILENCE:
            return 1.0
        if self._silence_since is None:
            return 0.0
        return min(1.0, (self.audio_ms - self._silence_since) / max(self.required_ms, 1.0))

    def push(self, probability: float) -> TurnEvent | None:
        """Consume one window's probability; returns the event it caused, if any."""
        p = self.params
        start = self.audio_ms
        self.audio_ms += self.window_ms
        if self.state is TurnState.SILENCE:
            if probability < p.threshold:
                return None
            self._move(TurnState.SPEECH)
            self._silence_since = None
            padded = max(self._last_stop_ms, start - p.prefix_padding_ms, 0.0)
            return TurnEvent(TurnEventType.SPEECH_STARTED, start, padded, self.audio_ms)
        if probability >= p.threshold:
            if self._silence_since is not None:
                self.required_ms = float(p.silence_duration_ms)  # the pause is over
            self._silence_since = None
        elif probability < p.threshold - p.hysteresis and self._silence_since is None:
            self._silence_since = start
        if self._silence_since is not None and self.audio_ms - self._silence_since >= self.required_ms:
            end = self._silence_since
            self._move(TurnState.SILENCE)
            self._silence_since = None
            self.required_ms = float(p.silence_duration_ms)
            self._last_stop_ms = end
            return TurnEvent(TurnEventType.SPEECH_STOPPED, end, end, self.audio_ms)
        return None

    def push_many(self, probabilities: Iterable[float]) -> list[TurnEvent]:
        """Consume several windows; returns their events in order."""
        events = []
        for prob in probabilities:
            event = self.push(float(prob))
            if event is not None:
                events.append(event)
        return events
