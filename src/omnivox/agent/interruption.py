"""Speech over the assistant: a real barge-in, or a cough, a backchannel or its own echo?

Barge-in waits for voiced audio (``speech_confirmed``) but not for words, so it is fast; a cough,
a door, "mhm" or the assistant's own voice coming back are voiced too. ``Interruption`` decides
what speech over the assistant is, from what the recogniser hears, as one explicit state machine
per user turn (``Phase``):

    NONE ──confirmed──> PAUSED ──words──> BARGED_IN
      │                   │  └──no words / backchannel / echo──> RESUMED ──speaks on──> PAUSED
      └── (no recovery) ──┴─────────────────────────────────────────> BARGED_IN
    (the user's turn ends: back to NONE)

- Voiced speech over the assistant pauses the reply at once (``Pause``): the barge-in is as quick
  as before, but undoable.
- Words that settle it (``judge``, on ``Evidence``): words other than a backchannel or the
  assistant's own recent words cut the reply (``Cut``); an utterance heard to its end (or to its
  first pause, when the recogniser flushes early) resumes it (``Resume``, with the reason) when it
  has no words, when the recogniser itself says it heard no speech (Whisper writes "I'll be right
  back." on a cough, and gives it a high no-speech probability and a low log-probability), when its
  words are only backchannels within ``backchannel_max_ms``, when they are the assistant's own, or
  when it is short, of few words, and unclear: the recogniser unsure of them, or too quiet against
  the reply playing meanwhile (a misheard "okay": "I'm Kay."; a lone word at a surer score than two
  or three: "door" for "sure"), or when it is one word looping (Whisper's hallucination on a
  cough: "Duh, duh, duh, duh"), or (on a wideband line only: ``Line``) when the recogniser, asked
  again, scores a backchannel on its sound as near as the few sure words it wrote
  (``sounds_backchannel``: the backchannel witness, ``voice.witness``). Words that ask the
  assistant to stop ("wait", "stop", "hold on", "no", "sorry", "hey") cut it whatever the scores.
  A partial transcript can only cut (a backchannel is judged once it is over), and within
  ``partial_wait_ms`` an early one of few words without a stop word waits (``Wait``, visible with
  its words): Whisper's first partial hears a fragment of a short sound and is sure of wrong words
  there ("Really?" for the first half of "mm hmm"); the reply is paused already, so its settled
  words decide.
- The thresholds are measured, not guessed: ``omnivox bench interruptions`` plays the bench's
  interjections over a reply's echo through the real hearing, prints each case's evidence and
  fits them (docs/benchmarks.md, "Judging speech over a reply").
- ``resume_ms`` after the pause with nothing settled, the words so far decide (``expired``): none
  resumes, any other cuts.
- With ``resume_ms`` 0 there is no recovery: voiced speech over the assistant cuts at once.
- Speech at the reply's end (``at_reply_end``): where the listener does not report its playback,
  the server's model of it ends before the listener's player does (by the network both ways and the
  player's buffer), and speech is confirmed ``confirm_ms`` and more after it began. Speech that
  began before the model's end plus ``player_lag_ms`` is still speech over the reply: it is paused
  (what the player has left stops) and judged the same way, so its own echo and a cough make no
  turn. But the reply has played out: nothing is left to resume, and the words may answer it (a
  quick "yes" after its question), so a backchannel or an unclear utterance heard there is answered
  as the user's turn, not swallowed (``agent.turns``). A listener that reports its playback says
  exactly when its player stopped: its reports decide, with no allowance. A reply with at most
  ``player_lag_ms`` of the audio it has sent left to play as modelled is at its end too
  (``left_s``): it has said all but what the player's own lag holds (or its next words are late),
  and the words may answer it as well (they are answered if it has ended by the turn's end).
  Over G.711 a "mm hmm" said a second into a 1.4 s reply was confirmed in its last 0.1 s while
  the reply's stream had not ended yet.
- At the reply's end an unclear utterance costs nothing it said: it is answered as the user's turn
  either way, and a resume plays on at most the player's lag. So the judge cuts there only on a
  stop word or on words the recogniser is sure of: two or three words are unclear at the lone
  word's bar (``reply_end_unclear_logprob_max``), not only below ``unclear_logprob_max``. Over
  G.711 Whisper wrote "That's it." (-0.87) and "I hope..." (-0.95) for a "mm hmm" said as a reply
  ended, with no reply audio under it to weigh (docs/benchmarks.md, "Conversation quality, round
  six").

Pure: no clocks of its own (audio times in milliseconds come in), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from itertools import pairwise

from omnivox.core.config import BACKCHANNELS
from omnivox.core.transitions import Machine
from omnivox.voice.turn.words import words

_ONE_LETTER_WORDS = frozenset("ai0123456789")
PARTIAL_WAIT_MS = 800.0  # ``InterruptionPolicy.partial_wait_ms`` as measured
WITNESS_OFF = 99.0  # ``witness_margin_min`` no margin reaches: the witness is not weighed
# the witness's threshold on a wideband line: offline (bench interruptions, A and B wideband) it
# took 5 -> 2 of 80 backchannels cut and lost no barge-in (docs/benchmarks.md, "The backchannel
# witness")
WITNESS_MARGIN_WIDEBAND = -0.5


class Line(StrEnum):
    """The line the user's voice comes over, as the adapter that built the session knows it."""

    # the microphone's own audio: realtime WebSocket clients, WebRTC calls, duplex
    WIDEBAND = "wideband"
    # G.711 at 8 kHz: SIP calls and carriers' media streams (Twilio, Telnyx, Plivo). The witness is
    # not weighed there: live it resumed two real barge-ins (a misheard onset before a sure word,
    # "Thanks. actually.") and offline it took no backchannel the other rules cut
    PHONE = "phone"


class Verdict(StrEnum):
    NO_WORDS = "no_words"  # noise: a cough, a door, breath
    NO_SPEECH = "no_speech"  # words the recogniser wrote on a sound it scores as no speech
    BACKCHANNEL = "backchannel"  # "mhm", "yeah", "okay"
    ECHO = "echo"  # the assistant's own words coming back
    UNCLEAR = "unclear"  # a short utterance of few words, unsure or quiet: a misheard backchannel
    # a short utterance whose sound the recogniser scores as near a backchannel as its own words
    SOUNDS_BACKCHANNEL = "sounds_backchannel"
    WORDS = "words"  # the user says something: a real barge-in


@dataclass(frozen=True)
class Evidence:
    """What the hearing knows of an utterance over the reply besides its words (``voice.listener``)."""

    no_speech_prob: float | None = None  # the recogniser's P(no speech); None: it gives none
    avg_logprob: float | None = None  # its mean log-probability of the words
    voiced_ms: float | None = None  # voiced audio in the utterance
    over_echo_db: float | None = None  # microphone level against the reply playing meanwhile
    # the best backchannel's forced log-probability on the sound less that of the words heard
    # (``voice.witness``): near 0 or above, the sound is as much a backchannel as those words
    backchannel_margin: float | None = None

    def describe(self) -> dict[str, float]:
        """The known fields, rounded (for the recording's timeline and the logs)."""
        return {k: round(v, 3) for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class InterruptionPolicy:
    """How speech over the assistant is judged (per session; see the README). The evidence
    thresholds are fitted by ``omnivox bench interruptions`` (docs/benchmarks.md)."""

    resume_ms: int = 1500  # a pause with no words settled this long resumes; 0: no recovery
    backchannels: tuple[str, ...] = BACKCHANNELS
    backchannel_max_ms: int = 1500  # longer utterances (to their first pause) are never backchannels
    echo_words: bool = True  # words the assistant has just said do not interrupt it
    evidence: bool = True  # weigh the recogniser's scores and the levels, not only the words
    no_speech_min: float = 0.3  # no_speech_prob at least this, with
    no_speech_logprob_max: float = -1.0  # avg_logprob at most this: no speech, whatever the words
    # the second step of the same boundary: where the recogniser is surer there was no speech, its
    # words may be surer too. Whisper writes "That's it." on a cough at P(no speech) 0.74-0.80,
    # log-probability -0.76 to -0.98 (wideband and G.711), and a lone "i" for espeak-ng's "i see"
    # at 0.83 / -0.71, where no real barge-in without a stop word came above 0.67 (bench
    # conversation's 50-turn runs, bench interruptions; a lone "wait" heard at 0.77 is a stop word,
    # judged before this)
    no_speech_high_min: float = 0.7
    no_speech_high_logprob_max: float = -0.62
    unclear_max_words: int = 3  # an unclear utterance has at most this many words,
    unclear_logprob_max: float = -1.1  # and the recogniser is this unsure of them,
    unclear_over_echo_db_max: float = -4.0  # or it was this quiet against the reply
    # a lone word is unclear at a surer log-probability than two or three: Whisper turns a short
    # backchannel into one confident wrong word ("door" for "sure", "Yo" for "yeah", "MHCAB." for
    # "mhm": -0.86 to -0.99) where a real barge-in of one word is a stop word or is followed by more
    # (the nearest, "actually": -0.80 wideband, -0.85 from espeak-ng over G.711: cut at once)
    unclear_single_logprob_max: float = -0.86
    # at the reply's end (``Interruption.at_reply_end``) an utterance of at most
    # ``unclear_max_words`` is unclear at this bar: answered either way, it costs at most the
    # player's lag of the reply to resume there (the module docstring)
    reply_end_unclear_logprob_max: float = -0.86
    # the backchannel witness (``voice.witness``): a short utterance of at most ``unclear_max_words``
    # words the recogniser is sure of (log-probability at least ``witness_logprob_min``, P(no speech)
    # under ``no_speech_high_min``) whose sound scores a backchannel, forced, within
    # ``witness_margin_min`` of those words is a misheard backchannel: Whisper sure of wrong words
    # ("Bye" for "i see"), which the unclear rules (for words it is unsure of) cannot take. Unsure
    # words are left to them: on the sound of a misheard barge-in ("Our" for espeak-ng's "sorry"
    # over G.711, -2.7) a backchannel scores as well as the garbage. Fitted by ``omnivox bench
    # interruptions`` (docs/benchmarks.md, "The backchannel witness"). Weighed on a wideband
    # ``line`` only (99: nowhere): live over G.711 it would have resumed two real barge-ins
    # ("Thanks. actually.": a misheard onset before a sure word, a backchannel +0.86 above it) and
    # it took no false cut the other rules leave there
    witness_margin_min: float = WITNESS_MARGIN_WIDEBAND
    witness_logprob_min: float = -1.0
    # one word said over and over ("Duh, duh, duh, duh"): Whisper's decoding loop on a noise, the
    # failure its own long-form decoding retries on (its compression-ratio test); this many or more
    loop_min_repeats: int = 3
    # words that interrupt however unsure the recogniser is of them (Whisper hears a lone "wait"
    # over a reply with a log-probability of -1.2; a hallucination on a cough is never one of these)
    # "hey" calls for attention as "excuse" does (and is what Whisper writes for espeak-ng's lone
    # "wait" over the echo: the bench's only word for two real barge-ins)
    stop_words: frozenset[str] = frozenset(
        {"wait", "stop", "hold", "hang", "no", "sorry", "pardon", "excuse", "hey"}
    )
    # a listener that does not report its playback plays a reply up to this long after the server's
    # model of it ends: its player started later than modelled (the gateway, the network, the first
    # chunk's wait: +7 to +59 ms measured by playback reports on loopback, bench conversation
    # --playback-reports) and its microphone's audio reaches the server later than it was said
    # (a chunk, 40 ms, and the network); the VAD's onset is good to a window or two (32 ms each).
    # About 150 ms on loopback; the rest is room for a network
    player_lag_ms: int = 250
    # the session's line (set by the adapter that built the session): the witness is weighed on a
    # wideband one only
    line: Line = Line.WIDEBAND
    # a partial transcript judged ``words`` within this much of the user's speech, of at most
    # ``unclear_max_words`` words and no stop word, does not cut the reply: it waits for the settled
    # words (the reply is paused already, so the caller hears nothing meanwhile). Whisper's partial
    # this early is decoded on a fragment or without the silence after it (the first partial a
    # quarter second in, the one as the speech falls quiet: ``decode_now``), and wrote "Really?",
    # "And.", "But I'm gonna..." for backchannels over G.711 at 240-260 ms, "and have it." for
    # espeak-ng's "mm hmm" at 696 ms, where a real barge-in's partial that alone cut it came at
    # 1000 ms or later (``bench interruptions --partials``, 616 cases: every wait from 700 to 900 ms
    # gave the fewest false cuts, 37 -> 12, and lost no barge-in; 1000 lost two: docs/benchmarks.md,
    # "Conversation quality, round seven"). 0: every partial judged ``words`` cuts
    partial_wait_ms: float = PARTIAL_WAIT_MS

    @property
    def weighs_witness(self) -> bool:
        """Whether the judge weighs the backchannel witness (the hearing computes it only then: it
        costs a recogniser pass per short utterance over a reply): on a wideband line, with the
        evidence weighed and a threshold set."""
        return self.evidence and self.line is Line.WIDEBAND and self.witness_margin_min < WITNESS_OFF

    def __post_init__(self) -> None:
        object.__setattr__(self, "_phrases", tuple({tuple(words(b)) for b in self.backchannels if words(b)}))

    def judge(
        self,
        text: str,
        speech_ms: float,
        spoken: str = "",
        evidence: Evidence | None = None,
        at_reply_end: bool = False,
    ) -> Verdict:
        """What ``text`` (heard over ``speech_ms`` of the user's turn) is, given the assistant's
        recently ``spoken`` words and what else the hearing knows of it (``evidence``);
        ``at_reply_end``: it came as the reply played out (``Interruption.at_reply_end``)."""
        # a lone letter is a fragment the recogniser made of a sound ("W-" for a cut-off "yeah", "x"
        # for a click), not a word anyone interrupts with
        heard = [w for w in words(text) if len(w) > 1 or w in _ONE_LETTER_WORDS]
        if not heard:
            return Verdict.NO_WORDS
        e = evidence if self.evidence and evidence is not None else Evidence()
        short = speech_ms <= self.backchannel_max_ms
        if short and self._covered(heard):
            return Verdict.BACKCHANNEL  # first: its words are kept in the transcript
        if self.evidence and any(w in self.stop_words for w in heard):
            return Verdict.WORDS  # "wait", "stop": an interruption, however unsure the recogniser
        if self._no_speech(e) or (self.evidence and short and self._looping(heard, e)):
            return Verdict.NO_SPEECH
        if self.echo_words and is_echo(heard, words(spoken)):
            return Verdict.ECHO
        if short and len(heard) <= self.unclear_max_words and self._sounds_backchannel(e):
            return Verdict.SOUNDS_BACKCHANNEL
        if short and len(heard) <= self.unclear_max_words and self._unclear(e, len(heard), at_reply_end):
            return Verdict.UNCLEAR
        return Verdict.WORDS

    def cuts_on_partial(self, text: str, speech_ms: float) -> bool:
        """Whether ``text``, a partial transcript judged ``words`` ``speech_ms`` into the user's
        speech, cuts the reply now: not within ``partial_wait_ms`` when it is at most
        ``unclear_max_words`` words (a loop counted once) with no stop word (its settled words
        decide)."""
        if not self.evidence or speech_ms > self.partial_wait_ms:
            return True
        heard = [w for w in words(text) if len(w) > 1 or w in _ONE_LETTER_WORDS]
        if any(w in self.stop_words for w in heard):
            return True
        # a word said over and over counts once: Whisper loops on a fragment ("Bright. Bright.
        # Bright. Bright. Bright. Bright" for hibari's "right", "Ice? Ice? ..." for "i see")
        runs = [w for i, w in enumerate(heard) if i == 0 or heard[i - 1] != w]
        return len(runs) > self.unclear_max_words

    def _no_speech(self, e: Evidence) -> bool:
        """Whether the recogniser scores the sound as no speech, whatever words it wrote on it: a
        two-step boundary, P(no speech) against the words' mean log-probability."""
        if e.no_speech_prob is None or e.avg_logprob is None:
            return False
        return (e.no_speech_prob >= self.no_speech_min and e.avg_logprob <= self.no_speech_logprob_max) or (
            e.no_speech_prob >= self.no_speech_high_min and e.avg_logprob <= self.no_speech_high_logprob_max
        )

    def _sounds_backchannel(self, e: Evidence) -> bool:
        return (
            self.weighs_witness
            and e.backchannel_margin is not None
            and e.backchannel_margin >= self.witness_margin_min
            and e.avg_logprob is not None
            and e.avg_logprob >= self.witness_logprob_min
            and (e.no_speech_prob is None or e.no_speech_prob < self.no_speech_high_min)
        )

    def _looping(self, heard: list[str], e: Evidence) -> bool:
        """One word over and over, on a sound the recogniser thinks more likely no speech than
        speech (it loops on real words too: "waiting waiting ..." for "wait", P(no speech) 0.38)."""
        return (
            e.no_speech_prob is not None and e.no_speech_prob >= 0.5 and loops(heard, self.loop_min_repeats)
        )

    def _unclear(self, e: Evidence, n_words: int, at_reply_end: bool = False) -> bool:
        if at_reply_end:
            most = self.reply_end_unclear_logprob_max
        else:
            most = self.unclear_single_logprob_max if n_words == 1 else self.unclear_logprob_max
        unsure = e.avg_logprob is not None and e.avg_logprob <= max(most, self.unclear_logprob_max)
        quiet = e.over_echo_db is not None and e.over_echo_db <= self.unclear_over_echo_db_max
        return unsure or quiet

    def _covered(self, heard: list[str]) -> bool:
        """Whether ``heard`` is a run of backchannel phrases ("yeah okay", "uh huh")."""
        phrases: tuple[tuple[str, ...], ...] = object.__getattribute__(self, "_phrases")
        ok = [True] + [False] * len(heard)  # ok[i]: heard[:i] is covered
        for i in range(len(heard)):
            if ok[i]:
                for p in phrases:
                    if tuple(heard[i : i + len(p)]) == p:
                        ok[i + len(p)] = True
        return ok[-1]


def loops(heard: list[str], repeats: int) -> bool:
    """Whether one word comes ``repeats`` or more times in a row ("duh duh duh duh du")."""
    run = 1
    for before, word in pairwise(heard):
        run = run + 1 if word == before else 1
        if run >= repeats:
            return True
    return False


def is_echo(heard: list[str], spoken: list[str]) -> bool:
    """Whether the words heard are (nearly all) the assistant's own, in its order: at least two
    words, and at least 80% of them a common subsequence of what it said."""
    if len(heard) < 2 or not spoken:
        return False
    prev = [0] * (len(spoken) + 1)
    for h in heard:
        row = [0] * (len(spoken) + 1)
        for j, s in enumerate(spoken):
            row[j + 1] = prev[j] + 1 if h == s else max(prev[j + 1], row[j])
        prev = row
    return prev[-1] >= 0.8 * len(heard)


class Phase(StrEnum):
    NONE = "none"  # nobody talks over the assistant
    PAUSED = "paused"  # the reply is paused until words settle it
    RESUMED = "resumed"  # not an interruption: the reply plays on
    BARGED_IN = "barged_in"  # a real barge-in: the reply was cut


P = Phase
TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    P.NONE: frozenset({P.PAUSED, P.BARGED_IN}),
    P.PAUSED: frozenset({P.RESUMED, P.BARGED_IN, P.NONE}),
    P.RESUMED: frozenset({P.PAUSED, P.BARGED_IN, P.NONE}),
    P.BARGED_IN: frozenset({P.NONE}),
}


@dataclass(frozen=True)
class Pause:
    """Stop the reply's audio now (undoable)."""


@dataclass(frozen=True)
class Resume:
    """Play the paused reply on."""

    reason: Verdict


@dataclass(frozen=True)
class Cut:
    """A real barge-in: cancel the reply."""


@dataclass(frozen=True)
class Wait:
    """Words on an early partial that do not cut yet (``partial_wait_ms``): the reply stays paused
    and the settled words decide. Nothing to do but say so (the judgement is visible)."""

    verdict: Verdict
    text: str
    evidence: Evidence | None


Decision = Pause | Resume | Cut | Wait


@dataclass
class Interruption:
    """One user turn's judgement of speech over the assistant (see the module docstring)."""

    policy: InterruptionPolicy = field(default_factory=InterruptionPolicy)
    started_ms: float = 0.0  # audio time the user's speech began
    paused_ms: float | None = None  # audio time the reply was paused
    verdict: Verdict | None = None  # the last judgement of this turn
    heard_text: str = ""  # the words it was made on
    evidence: Evidence | None = None  # and the rest of what was known
    at_reply_end: bool = False  # paused after the reply had played out as modelled (see the docstring)

    def __post_init__(self) -> None:
        self._machine = Machine(TRANSITIONS, P.NONE, "interruption")

    @property
    def phase(self) -> Phase:
        return self._machine.state

    def speech_started(self, audio_ms: float) -> None:
        self.started_ms = audio_ms

    def confirmed(
        self,
        audio_ms: float,
        assistant_speaking: bool,
        played_out_s: float | None = None,
        left_s: float | None = None,
    ) -> Decision | None:
        """The user's speech holds (enough voiced audio). ``played_out_s``: the reply on the floor
        finished playing this long ago as modelled (None: the listener reports its playback, or no
        reply was heard); ``left_s``: the reply on the floor has this much of the audio it sent left
        to play as modelled (None: none, or the listener reports its playback)."""
        if self.phase is not P.NONE:
            return None
        if not assistant_speaking:
            if not self.began_while_playing(audio_ms, played_out_s):
                return None
            self.at_reply_end = True
        elif left_s is not None and left_s * 1000 <= self.policy.player_lag_ms:
            self.at_reply_end = True  # all it has sent but the player's lag has played
        if self.policy.resume_ms <= 0:
            self._machine.move(P.BARGED_IN)
            return Cut()
        return self._pause(audio_ms)

    def began_while_playing(self, audio_ms: float, played_out_s: float | None) -> bool:
        """Whether speech confirmed at ``audio_ms`` began while the listener's player may still have
        been playing a reply that finished ``played_out_s`` ago as modelled: the speech has lasted
        ``audio_ms - started_ms``, and the player runs up to ``player_lag_ms`` behind the model."""
        if played_out_s is None:
            return False
        return played_out_s * 1000 <= audio_ms - self.started_ms + self.policy.player_lag_ms

    def speaks_on(self, audio_ms: float, assistant_speaking: bool) -> Decision | None:
        """The user speaks again after a pause in their turn (after "yeah", a sentence may follow)."""
        if self.phase is P.RESUMED and assistant_speaking:
            return self._pause(audio_ms)
        return None

    def heard(
        self, text: str, audio_ms: float, spoken: str, settled: bool, evidence: Evidence | None = None
    ) -> Decision | None:
        """Words heard while the reply is paused (``settled``: the utterance is over, or flushed at
        its first pause; else a partial transcript, which can only cut, or say that its early few
        words wait for the settled ones: ``Wait``)."""
        if self.phase is not P.PAUSED:
            return None
        speech_ms = audio_ms - self.started_ms
        verdict = self.policy.judge(text, speech_ms, spoken, evidence, self.at_reply_end)
        if verdict is Verdict.WORDS and not settled and not self.policy.cuts_on_partial(text, speech_ms):
            return Wait(verdict, text, evidence)
        self.heard_text, self.evidence = text, evidence
        if verdict is Verdict.WORDS:
            return self._cut(verdict)
        if settled:
            return self._resume(verdict)
        return None

    def due(self, audio_ms: float) -> bool:
        """The pause has lasted ``resume_ms`` with nothing settled."""
        return (
            self.phase is P.PAUSED
            and self.paused_ms is not None
            and audio_ms - self.paused_ms >= self.policy.resume_ms
        )

    def expired(
        self, text: str, audio_ms: float, spoken: str, evidence: Evidence | None = None
    ) -> Decision | None:
        """``due``: the words so far (``text``, decoded now) settle it."""
        if self.phase is not P.PAUSED:
            return None
        verdict = self.policy.judge(text, audio_ms - self.started_ms, spoken, evidence, self.at_reply_end)
        self.heard_text, self.evidence = text, evidence
        return self._cut(verdict) if verdict is Verdict.WORDS else self._resume(verdict)

    def turn_ended(self) -> Verdict | None:
        """The user's turn is over: the judgement of it (None: it never overlapped the assistant)."""
        verdict, self.verdict, self.paused_ms = self.verdict, None, None
        self.at_reply_end = False
        self._machine.move(P.NONE)
        return verdict

    def _pause(self, audio_ms: float) -> Pause:
        self._machine.move(P.PAUSED)
        self.paused_ms = audio_ms
        return Pause()

    def _resume(self, verdict: Verdict) -> Resume:
        self._machine.move(P.RESUMED)
        self.verdict = verdict
        return Resume(verdict)

    def _cut(self, verdict: Verdict) -> Cut:
        self._machine.move(P.BARGED_IN)
        self.verdict = verdict
        return Cut()
