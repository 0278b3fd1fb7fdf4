"""Turn-taking: what was heard in, what the session should do out (typed actions, no I/O).

- Speech starts: ``input_audio_buffer.speech_started`` (the user item's id is fixed here), and the
  idle timer stops.
- Speech holds (``speech_confirmed``) while the assistant is speaking: with ``interrupt_response``,
  a possible barge-in, judged by ``voice.turn.interruption``: the reply pauses at once
  (``PauseReply``), then words other than a backchannel or the assistant's own cut it (``BargeIn``,
  reason ``turn_detected``); no words within ``false_interruption_ms``, a backchannel or its own
  echo resume it (``ResumeReply``). A backchannel is committed as the user's item (the transcript
  keeps it) without a reply; echo and noise make no item. With ``false_interruption_ms`` 0 the
  reply is cut at once, as soon as speech holds.
- Partial transcripts become ``conversation.item.input_audio_transcription.delta``. Deltas only
  append, but a streaming recogniser revises its latest words, so only the words two successive
  partials agree on are sent; the final transcript (``.completed``) settles the rest.
- A pause long enough to predict the end of the turn: prepare the reply (held: nothing is said);
  the user speaking again drops it.
- Speech stops: ``speech_stopped``, then the final transcript commits the user's turn and, with
  ``create_response`` and no response running, the reply goes out (the prepared one if it answered
  these very words). Speech that was only noise (no words) makes no item and no reply.

The session executes the actions in order; what turn-taking needs to know of the other side comes
in as a ``Floor``.
"""

from __future__ import annotations

from dataclasses import dataclass

from omnivox.protocol.realtime import events as ev
from omnivox.protocol.realtime.session_config import TurnDetection
from omnivox.protocol.wire import Msg
from omnivox.voice.listener import Heard
from omnivox.voice.turn.interruption import (
    Cut,
    Decision,
    Interruption,
    InterruptionPolicy,
    Pause,
    Resume,
    Verdict,
)
from omnivox.worker.realtime.conversation import item_id


@dataclass(frozen=True)
class Floor:
    """The assistant's side of the floor, as the session sees it when something is heard."""

    speaking: bool = False  # a response runs, or its audio is still playing at the client
    responding: bool = False  # a response runs
    spoken: str = ""  # the assistant's words the user may just have heard (the echo guard's)


@dataclass(frozen=True)
class Emit:
    event: Msg


@dataclass(frozen=True)
class StopIdle:
    """The user is there: the idle timer stops."""


@dataclass(frozen=True)
class BargeIn:
    reason: str = "turn_detected"


@dataclass(frozen=True)
class PauseReply:
    """Speech over the assistant: stop its audio now, until the speech is judged."""


@dataclass(frozen=True)
class ResumeReply:
    """The speech was not an interruption: play the reply on."""

    reason: str  # no_words | backchannel | echo


@dataclass(frozen=True)
class Prepare:
    """Prepare (and hold) the reply to ``text`` while the pause runs out."""

    text: str


@dataclass(frozen=True)
class DropPrepared:
    pass


@dataclass(frozen=True)
class CommitTurn:
    """The user's turn is over: commit it as ``item_id``; reply at once when ``respond``."""

    item_id: str
    text: str
    respond: bool = False
    speech_end_at: float | None = None  # monotonic time the user's speech ended


Action = Emit | StopIdle | BargeIn | PauseReply | ResumeReply | Prepare | DropPrepared | CommitTurn


class TurnTaking:
    def __init__(
        self,
        vad: TurnDetection | None = None,
        transcribe: bool = True,
        policy: InterruptionPolicy | None = None,
    ) -> None:
        self.vad = vad  # None: manual turns
        self.transcribe = transcribe  # the client asked for transcription events
        self.interruption = Interruption(policy or InterruptionPolicy())
        self._item_id: str | None = None  # the user item being spoken
        self._stopped_ms = 0.0  # where the last speech ended (audio time)
        self._delta_text = ""  # transcription sent as deltas for the current item
        self._last_partial: list[str] = []

    @property
    def in_turn(self) -> bool:
        """The user has started an item that is not committed yet."""
        return self._item_id is not None

    def heard(self, heard: Heard, arrival: float, floor: Floor) -> list[Action]:
        """What to do about one listener event; ``arrival`` is when the chunk that caused it arrived."""
        vad = self.vad
        judge = self.interruption
        if heard.kind == "speech_started":
            self._item_id, self._delta_text, self._last_partial = item_id(), "", []
            judge.speech_started(heard.audio_ms + (vad.prefix_padding_ms if vad is not None else 0))
            return [
                StopIdle(),
                Emit(ev.SpeechStarted(audio_start_ms=int(heard.audio_ms), item_id=self._item_id)),
            ]
        if heard.kind == "speech_confirmed":
            if vad is not None and vad.interrupt_response:
                return _act(judge.confirmed(heard.audio_ms, floor.speaking))
            return []
        if heard.kind == "partial":
            cut = _act(judge.heard(heard.text, heard.audio_ms, floor.spoken, settled=False))
            return cut + self._partial(heard.text)
        if heard.kind == "pause":
            text = heard.text.strip()
            actions = _act(judge.heard(text, heard.audio_ms, floor.spoken, settled=True))
            if vad is not None and vad.create_response and text and not floor.responding:
                actions.append(Prepare(text))
            return actions
        if heard.kind == "resumed":
            return [DropPrepared(), *_act(judge.speaks_on(heard.audio_ms, floor.speaking))]
        if heard.kind == "speech_stopped":
            self._stopped_ms = heard.audio_ms
            return [Emit(ev.SpeechStopped(audio_end_ms=int(heard.audio_ms), item_id=self._ensure_item()))]
        # final: the chunk that ended the turn arrived at ``arrival``; speech ended that much earlier
        speech_end_at = arrival - max(0.0, heard.audio_ms - self._stopped_ms) / 1000
        actions = _act(judge.heard(heard.text, heard.audio_ms, floor.spoken, settled=True))
        verdict = judge.turn_ended()
        cut_now = verdict is Verdict.WORDS  # this turn cut the reply: it gets its own
        text = "" if verdict is Verdict.ECHO else heard.text  # its own voice is not the user's turn
        respond = (
            vad is not None
            and vad.create_response
            and (cut_now or not floor.responding)
            and verdict is not Verdict.BACKCHANNEL  # "mhm" as a reply ends asks for nothing
        )
        return actions + self.commit(text, respond=respond, speech_end_at=speech_end_at)

    def expire(self, text: str, audio_ms: float, floor: Floor) -> list[Action]:
        """The reply has been paused ``false_interruption_ms``: the words so far (``text``) settle it."""
        return _act(self.interruption.expired(text, audio_ms, floor.spoken))

    def commit(
        self,
        transcript: str,
        *,
        keep_empty: bool = False,
        respond: bool = False,
        speech_end_at: float | None = None,
    ) -> list[Action]:
        """End the user's turn (the VAD's end of speech, or a client's commit). Nothing said makes
        no item (``cleared``) unless ``keep_empty``."""
        item = self._ensure_item()
        self._item_id, self._delta_text, self._last_partial = None, "", []
        self.interruption.turn_ended()
        text = transcript.strip()
        if not text and not keep_empty:
            return [Emit(ev.Cleared()), DropPrepared()]  # noise, not a turn
        commit = CommitTurn(item, text, respond=respond, speech_end_at=speech_end_at)
        return [commit] if respond else [commit, DropPrepared()]

    def _ensure_item(self) -> str:
        if self._item_id is None:
            self._item_id = item_id()
        return self._item_id

    def _partial(self, text: str) -> list[Action]:
        words, previous = text.split(), self._last_partial
        self._last_partial = words
        if not self.transcribe or self._item_id is None:
            return []
        agreed: list[str] = []
        for a, b in zip(words, previous, strict=False):
            if a != b:
                break
            agreed.append(a)
        stable = " ".join(agreed)
        if len(stable) <= len(self._delta_text) or not stable.startswith(self._delta_text):
            return []  # nothing new is settled, or the recogniser took back words already sent
        delta = stable[len(self._delta_text) :]
        self._delta_text = stable
        return [Emit(ev.TranscriptionDelta(item_id=self._item_id, delta=delta))]


def _act(decision: Decision | None) -> list[Action]:
    if isinstance(decision, Pause):
        return [PauseReply()]
    if isinstance(decision, Resume):
        return [ResumeReply(decision.reason.value)]
    if isinstance(decision, Cut):
        return [BargeIn("turn_detected")]
    return []
