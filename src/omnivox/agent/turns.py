r"""Turn-taking: what was heard in, what the agent should do out (typed actions, no I/O).

- Speech starts: ``SpeechStarted`` (the user turn's id is fixed here, from the adapter's ``new_id``),
  and the idle timer stops.
- Speech holds (``speech_confirmed``) while the assistant is speaking: with ``interrupt_response``,
  a possible barge-in, judged by ``agent.interruption``: the reply pauses at once
  (``PauseReply``), then words other than a backchannel or the assistant's own cut it (``BargeIn``,
  reason ``turn_detected``); no words within ``false_interruption_ms``, a backchannel, its own
  echo, words the recogniser scores as no speech, or a short unclear utterance resume it
  (``ResumeReply``); the judgement and its evidence are emitted (``SpeechJudged``). A backchannel
  or an unclear utterance is committed as the user's turn (the transcript keeps it) without a
  reply, unless it came as the reply ended (``Interruption.at_reply_end``: the reply has played
  out, so it may answer it, a quick "yes" to its question): then it is answered; echo and noise
  make no turn. With ``false_interruption_ms`` 0 the reply is cut at once, as soon as speech holds.
- Partial transcripts become ``TranscriptDelta``\ s. Deltas only append, but a streaming recogniser
  revises its latest words, so only the words two successive partials agree on are sent; the final
  transcript (the committed turn) settles the rest.
- While the user speaks, their words so far are computed ahead in the LLM (``Prefill``): the
  conversation and the user turn's opening when speech starts, then the words of each partial but
  its last (which the recogniser may still be cutting), so the reply computes only what came after.
- A reply ends: the next turn's opening is prefilled at once (``Prefill("")``), while the LLM is
  idle and the reply's audio still plays.
- A pause (from its first windows: the listener's ``pause``): prepare the reply (held: nothing is
  said); the user speaking again drops it, and the LLM's state goes back to the words still believed
  (``Prefill`` again: the discarded reply's keys and values are rolled back).
- Speech stops: ``SpeechStopped``, then the final transcript commits the user's turn and, with
  ``create_response`` and no reply running, the reply goes out (the prepared one if it answered
  these very words). Speech that was only noise (no words) makes no turn (``InputCleared``) and no
  reply.

The agent executes the actions in order; what turn-taking needs to know of the other side comes in
as a ``Floor``. Its events (``Emit``) are protocol-neutral (``agent.events``): an adapter words them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from omnivox.agent.events import (
    HearingEvent,
    InputCleared,
    JudgedAction,
    SpeechJudged,
    SpeechStarted,
    SpeechStopped,
    TranscriptDelta,
)
from omnivox.agent.interruption import (
    Cut,
    Decision,
    Evidence,
    Interruption,
    InterruptionPolicy,
    Pause,
    Resume,
    Verdict,
    Wait,
)
from omnivox.core.ids import new_id
from omnivox.voice.listener import Heard
from omnivox.voice.vad.turn import TurnParams

# verdicts of words that ask nothing of a reply playing on: "mhm", or what it was misheard as
_ASKS_NOTHING = (Verdict.BACKCHANNEL, Verdict.UNCLEAR, Verdict.SOUNDS_BACKCHANNEL)


def turn_id() -> str:
    return new_id("turn")


@dataclass(frozen=True)
class TurnSettings:
    """How turns are detected and answered (the agent's; None in its place: manual turns)."""

    params: TurnParams = field(default_factory=TurnParams)  # the VAD (and semantic_vad)
    create_response: bool = True  # the end of the user's turn is answered
    interrupt_response: bool = True  # speech over the assistant may pause, then cut, its reply
    idle_timeout_ms: int | None = None  # the user says nothing this long after a reply: prompt them


@dataclass(frozen=True)
class Floor:
    """The assistant's side of the floor, as the agent sees it when something is heard."""

    speaking: bool = False  # a reply runs, or its audio is still playing at the listener
    responding: bool = False  # a reply runs
    spoken: str = ""  # the assistant's words the user may just have heard (the echo guard's)
    # the reply on the floor finished playing this long ago by the server's model (None: the
    # listener reports its playback, or none was heard): speech that began before the listener's
    # player stopped is still over the reply (``Interruption.began_while_playing``)
    played_out_s: float | None = None
    # the reply on the floor has this much of the audio it has sent left to play by the model
    # (None: none is on the floor, or the listener reports its playback): its last
    # ``player_lag_ms`` is its end too (``Interruption.confirmed``)
    left_s: float | None = None


@dataclass(frozen=True)
class Emit:
    event: HearingEvent


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
class Prefill:
    """Compute the reply's prompt ahead, up to the user's words so far (``text``; "": the turn's
    opening alone)."""

    text: str


@dataclass(frozen=True)
class CommitTurn:
    """The user's turn is over: commit it as ``turn_id``; reply at once when ``respond``."""

    turn_id: str
    text: str
    respond: bool = False
    speech_end_at: float | None = None  # monotonic time the user's speech ended


Action = Emit | StopIdle | BargeIn | PauseReply | ResumeReply | Prepare | DropPrepared | Prefill | CommitTurn


class TurnTaking:
    def __init__(
        self,
        vad: TurnSettings | None = None,
        transcribe: bool = True,
        policy: InterruptionPolicy | None = None,
        new_id: Callable[[], str] = turn_id,
    ) -> None:
        self.vad = vad  # None: manual turns
        self.transcribe = transcribe  # the adapter wants transcript deltas
        self.interruption = Interruption(policy or InterruptionPolicy())
        self.new_id = new_id  # the id of a user turn (the adapter's: realtime's item ids)
        self._turn_id: str | None = None  # the user turn being spoken
        self._stopped_ms = 0.0  # where the last speech ended (audio time)
        self._delta_text = ""  # transcription sent as deltas for the current turn
        self._last_partial: list[str] = []
        self._early = ""  # the words of the turn up to its last pause (the listener's flush)
        self._prefilled = ""  # the user's words last prefilled

    @property
    def in_turn(self) -> bool:
        """The user has started a turn that is not committed yet."""
        return self._turn_id is not None

    def heard(self, heard: Heard, arrival: float, floor: Floor) -> list[Action]:
        """What to do about one listener event; ``arrival`` is when the chunk that caused it arrived."""
        vad = self.vad
        judge = self.interruption
        if heard.kind == "speech_started":
            self._turn_id, self._delta_text, self._last_partial = self.new_id(), "", []
            self._early = self._prefilled = ""
            judge.speech_started(heard.audio_ms + (vad.params.prefix_padding_ms if vad is not None else 0))
            started: list[Action] = [StopIdle(), Emit(SpeechStarted(self._turn_id, heard.audio_ms))]
            return started + self._prefill("", floor)
        if heard.kind == "speech_confirmed":
            if vad is not None and vad.interrupt_response:
                return self._act(
                    judge.confirmed(heard.audio_ms, floor.speaking, floor.played_out_s, floor.left_s)
                )
            return []
        if heard.kind == "partial":
            cut = self._act(judge.heard(heard.text, heard.audio_ms, floor.spoken, False, evidence(heard)))
            settled = " ".join([*self._early.split(), *heard.text.split()[:-1]])  # its last word may change
            prefill = self._prefill(settled, floor) if settled and self._turn_id is not None else []
            return cut + self._partial(heard.text) + prefill
        if heard.kind == "pause":
            text = heard.text.strip()
            self._early = text
            actions = self._act(judge.heard(text, heard.audio_ms, floor.spoken, True, evidence(heard)))
            if vad is not None and vad.create_response and text and not floor.responding:
                actions.append(Prepare(text))
                self._prefilled = text  # the prepared reply computes them
            return actions
        if heard.kind == "resumed":
            rollback = self._prefill(self._early, floor, again=True)
            return [DropPrepared(), *rollback, *self._act(judge.speaks_on(heard.audio_ms, floor.speaking))]
        if heard.kind == "speech_stopped":
            self._stopped_ms = heard.audio_ms
            return [Emit(SpeechStopped(self._ensure_turn(), heard.audio_ms))]
        # final: the chunk that ended the turn arrived at ``arrival``; speech ended that much earlier
        speech_end_at = arrival - max(0.0, heard.audio_ms - self._stopped_ms) / 1000
        actions = self._act(judge.heard(heard.text, heard.audio_ms, floor.spoken, True, evidence(heard)))
        at_reply_end = judge.at_reply_end
        verdict = judge.turn_ended()
        cut_now = verdict is Verdict.WORDS  # this turn cut the reply: it gets its own
        # its own voice, or a sound the recogniser made words of, is not the user's turn
        text = "" if verdict in (Verdict.ECHO, Verdict.NO_SPEECH) else heard.text
        respond = (
            vad is not None
            and vad.create_response
            and (cut_now or not floor.responding)
            # "mhm" (or what it was misheard as) over a reply asks for nothing; as it ended, the
            # words may answer it ("yes"): nothing plays on, so they are answered
            and (at_reply_end or verdict not in _ASKS_NOTHING)
        )
        return actions + self.commit(text, respond=respond, speech_end_at=speech_end_at)

    def expire(self, heard: Heard, floor: Floor) -> list[Action]:
        """The reply has been paused ``false_interruption_ms``: the utterance so far (``heard``,
        decoded now) settles it."""
        return self._act(self.interruption.expired(heard.text, heard.audio_ms, floor.spoken, evidence(heard)))

    def commit(
        self,
        transcript: str,
        *,
        keep_empty: bool = False,
        respond: bool = False,
        speech_end_at: float | None = None,
    ) -> list[Action]:
        """End the user's turn (the VAD's end of speech, or a client's commit). Nothing said makes
        no turn (``InputCleared``) unless ``keep_empty``."""
        turn = self._ensure_turn()
        self._turn_id, self._delta_text, self._last_partial = None, "", []
        self.interruption.turn_ended()
        text = transcript.strip()
        if not text and not keep_empty:
            return [Emit(InputCleared()), DropPrepared()]  # noise, not a turn
        commit = CommitTurn(turn, text, respond=respond, speech_end_at=speech_end_at)
        return [commit] if respond else [commit, DropPrepared()]

    def reply_over(self, floor: Floor) -> list[Action]:
        """A reply has ended (its audio may still play): compute the next turn's opening now, while
        the LLM is idle. The conversation renders the reply from its words, and where the LLM sampled
        other tokens than those words make ("I" + "'ll"), the prefix its state shares with the
        conversation ends there: the rest of the reply is computed again here, not as the user
        starts speaking (docs/benchmarks.md, voice to voice round four). Nothing while the user is
        already speaking: their words are being prefilled."""
        if self._turn_id is not None:
            return []
        return self._prefill("", floor, again=True)

    def _prefill(self, text: str, floor: Floor, again: bool = False) -> list[Action]:
        """Prefill up to ``text`` if it says more than was prefilled (``again``: whatever was computed
        after it, a discarded reply, goes)."""
        vad = self.vad
        if vad is None or not vad.create_response or floor.responding:
            return []  # no reply will come of these words, or one is speaking (the LLM is its)
        if text and not again and (len(text) <= len(self._prefilled) or not text.startswith(self._prefilled)):
            return []  # nothing new (a recogniser that took words back is caught up with at the end)
        self._prefilled = text
        return [Prefill(text)]

    def _act(self, decision: Decision | None) -> list[Action]:
        """The actions of one decision; a judgement (resume or cut on the evidence) is emitted with
        its reason first. (Without recovery, speech cuts unjudged.)"""
        if isinstance(decision, Pause):
            return [PauseReply()]
        if isinstance(decision, Wait):
            e = decision.evidence.describe() if decision.evidence is not None else {}
            return [Emit(SpeechJudged(decision.verdict.value, "wait", decision.text, e))]
        if not isinstance(decision, Resume | Cut):
            return []
        judge = self.interruption
        action: Action = ResumeReply(decision.reason.value) if isinstance(decision, Resume) else BargeIn()
        if judge.verdict is None:
            return [action]
        e = judge.evidence.describe() if judge.evidence is not None else {}
        what: JudgedAction = "cut" if isinstance(decision, Cut) else "resume"
        return [Emit(SpeechJudged(judge.verdict.value, what, judge.heard_text, e)), action]

    def _ensure_turn(self) -> str:
        if self._turn_id is None:
            self._turn_id = self.new_id()
        return self._turn_id

    def _partial(self, text: str) -> list[Action]:
        words, previous = text.split(), self._last_partial
        self._last_partial = words
        if not self.transcribe or self._turn_id is None:
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
        return [Emit(TranscriptDelta(self._turn_id, delta))]


def evidence(heard: Heard) -> Evidence:
    """What the hearing knows of the utterance besides its words."""
    scores = heard.scores
    return Evidence(
        no_speech_prob=scores.no_speech_prob if scores is not None else None,
        avg_logprob=scores.avg_logprob if scores is not None else None,
        voiced_ms=heard.voiced_ms,
        over_echo_db=heard.over_echo_db,
        backchannel_margin=heard.backchannel_margin,
    )
