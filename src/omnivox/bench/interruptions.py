"""Speech over a reply, judged offline on the real hearing, and the judge's thresholds fitted to it.

Each case is what ``bench conversation``'s callers do one second into a reply, replayed without a
server: hibari says a reply into a speakerphone (``--delay-ms`` late at each ``--gains-db``, back
into the microphone), and a caller (hibari or espeak-ng) says a backchannel, a noise burst (espeak-ng
phonemes: breathy coughs) or a real barge-in over it, or nothing (the echo alone). The server's own
hearing runs on it in 40 ms chunks with the reference as a session takes it: the echo gate, silero,
Whisper tiny.en; voiced speech pauses the reply (the speaker stops, and stays stopped: a simplification
of a resume) and every point where the agent's judge would settle the speech (each flush at a pause,
the final transcript, the words so far when the pause has run ``resume_ms``) is kept with its
evidence. A policy's outcome on a case: cut at the first point it judges ``words``, else the last
point's verdict; a barge-in that never paused the reply (silero heard nothing) counts as missed.
``--line g711`` puts the caller's voice and the reply's echo through a telephone line first (8 kHz
G.711 mu-law and back; the server's reference stays the reply as sent).

Then the thresholds of ``InterruptionPolicy`` (no speech: ``no_speech_min`` and
``no_speech_logprob_max``; unclear: ``unclear_logprob_max`` and ``unclear_over_echo_db_max``, then
``unclear_single_logprob_max`` for a lone word; the backchannel witness: ``witness_margin_min``
and ``witness_logprob_min``) are fitted on those cases: the least errors, a
missed barge-in counting ``--miss-weight`` times a false one; of the thresholds that make the least,
those that cut fewest barge-ins late (a first word resumed, the cut only at the next point), then
those that resume fewest cases on the evidence (a lost barge-in is the worse mistake), then the
middle of their range (the median of each). The table gives the
verdicts of the words alone (``evidence`` off), of the policy's defaults and of the fitted one.
Model work only: the figures do not depend on the machine's speed.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace

import numpy as np

from omnivox.agent.interruption import (
    WITNESS_OFF,
    Evidence,
    InterruptionPolicy,
    Line,
    Verdict,
)
from omnivox.agent.turns import evidence
from omnivox.bench.table import print_table, write_json
from omnivox.voice.listener import Listener
from omnivox.voice.vad.turn import TurnParams

RATE = 16000
PARTIAL_MS = 1000  # a session's Whisper partials (``Settings.asr_partial_ms``)
CHUNK = RATE * 40 // 1000
REPLY = (
    "Sure. In Paris today it is mild and mostly sunny, with a light breeze in the afternoon "
    "and a chance of rain later in the evening, so take an umbrella if you go out."
)
BACKCHANNELS = ("yeah", "okay", "right", "mm hmm", "i see", "uh huh", "mhm", "sure")
NOISES = ("[[h@@]]", "[[hV]]", "[[h@@ h@@]]", "[[h@@ h@@ h@@]]", "[[hV hV]]")  # espeak-ng: no words
BARGE_INS = (
    "wait, stop, what about tomorrow",
    "actually, tell me about the train instead",
    "wait",
    "stop",
    "hold on",
    "no, that's wrong",
    "sorry, what was that",
    "what about tomorrow",
)
KINDS = ("echo", "backchannel", "noise", "barge_in")
FALSE_IF_CUT = ("echo", "backchannel", "noise")  # cutting the reply for these is a false barge-in


@dataclass(frozen=True)
class Settled:
    """One point where the speech over the reply is judged: the words so far and the evidence."""

    text: str
    speech_ms: float
    evidence: dict[str, float]
    # a partial transcript (``--partials``): it can only cut, and only where the policy cuts on one
    partial: bool = False


@dataclass
class Observation:
    """One case, and every point at which the judge would settle it."""

    kind: str  # echo | backchannel | noise | barge_in
    voice: str
    said: str
    gain_db: float
    paused: bool  # the speech paused the reply (False: silero heard none; nothing to judge)
    points: list[Settled]

    def judged_by(self, policy: InterruptionPolicy) -> str:
        """The verdict ``policy`` comes to: the first point judged ``words`` cuts the reply, else the
        last point's verdict stands ("unheard": never paused; "unjudged": paused, never settled)."""
        return self._judged(policy)[0]

    def cut_at(self, policy: InterruptionPolicy) -> int | None:
        """The point at which ``policy`` cuts the reply (None: it does not)."""
        verdict, at = self._judged(policy)
        return at if verdict == Verdict.WORDS.value else None

    def _judged(self, policy: InterruptionPolicy) -> tuple[str, int]:
        if not self.paused:
            return "unheard", -1
        verdict, last = "unjudged", -1
        for at, p in enumerate(self.points):
            judged = policy.judge(p.text, p.speech_ms, REPLY, Evidence(**p.evidence)).value
            if p.partial:
                if judged == Verdict.WORDS.value and policy.cuts_on_partial(p.text, p.speech_ms):
                    return judged, at
                continue
            verdict, last = judged, at
            if verdict == Verdict.WORDS.value:
                return verdict, at
        return verdict, last


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--voices", nargs="+", default=["hibari", "espeak"], help="the caller's voices")
    parser.add_argument("--gains-db", nargs="+", type=float, default=[-6.0, -10.0, -20.0])
    parser.add_argument("--delay-ms", type=float, default=80.0, help="speaker to microphone delay")
    parser.add_argument("--at-s", type=float, default=1.0, help="when the caller speaks into the reply")
    parser.add_argument("--miss-weight", type=float, default=3.0, help="a missed barge-in counts this much")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument(
        "--line",
        default="wide",
        choices=["wide", "g711"],
        help="g711: the caller's voice and the reply's echo through a telephone line (8 kHz mu-law)",
    )
    parser.add_argument(
        "--partials",
        action="store_true",
        help="hear as a session does: Whisper's partials (every second, and as the speech falls "
        "quiet) are judged too, and the pause is flushed at 0.1 of the silence (the agent's)",
    )
    parser.add_argument(
        "--observations",
        nargs="+",
        help="fit the cases of earlier runs' --json files instead of hearing them again",
    )
    parser.add_argument(
        "--conversations",
        nargs="+",
        default=[],
        help="add the judged interjections of `bench conversation --json` runs (live cases)",
    )


class Hearing:
    """The server's hearing, loaded once: silero, Whisper tiny.en, the echo gate per case. Without
    ``partials`` only the settled transcripts judge; with them, Whisper's partials come as a
    session's do (``asr_partial_ms``, and one as the speech falls quiet: ``decode_now``), each
    waited for after the chunk that started it so that a case hears the same each run, and the
    pause is flushed as early as the agent's (``speculate_at`` 0.1)."""

    def __init__(self, partials: bool = False) -> None:
        from omnivox.voice.asr.whisper_asr import WhisperAsr
        from omnivox.voice.vad.silero import SileroVad

        self.partials = partials
        self.vad = SileroVad(RATE)
        self.asr = WhisperAsr(partial_interval_ms=PARTIAL_MS) if partials else WhisperAsr()

    def listener(self) -> Listener:
        from omnivox.voice.echo.gate import EchoGate

        self.vad.reset()
        self.asr.reset()
        speculate_at = 0.1 if self.partials else 0.3
        return Listener(
            self.vad, self.asr, TurnParams(silence_duration_ms=500), 150.0, speculate_at, echo=EchoGate()
        )


def hear_case(
    hearing: Hearing,
    reply: np.ndarray,
    clip: np.ndarray | None,
    *,
    gain_db: float = -10.0,
    delay_ms: float = 80.0,
    at_s: float = 1.0,
    resume_ms: float = 1500.0,
    echo: np.ndarray | None = None,
) -> tuple[bool, list[Settled]]:
    """Play ``reply`` (16 kHz) into a speakerphone and say ``clip`` over it ``at_s`` in: whether the
    speech paused the reply (the speaker stops, as a client's player does), and every point the
    judge settles it at (each flush at a pause, the final transcript, or the words so far
    ``resume_ms`` after the pause with nothing settled), as the agent's turn-taking would see them.
    ``echo``: the reply as the caller's speaker plays it (over a telephone line; default ``reply``),
    sample for sample; the server's reference stays ``reply``."""
    heard_reply = reply if echo is None else echo
    listener = hearing.listener()
    gain = 10 ** (gain_db / 20)
    delay = int(RATE * delay_ms / 1000)
    start = int(at_s * RATE)
    voice = np.zeros(len(reply) + RATE * 3, np.float32)
    if clip is not None:
        voice[start : start + len(clip)] += clip[: len(voice) - start]
    end = start + (len(clip) if clip is not None else 0) + 2 * RATE
    speaker = np.zeros(len(voice) + delay, np.float32)  # what the speaker played, sample by sample
    played = 0  # reply samples played so far
    paused_ms: float | None = None  # when the reply paused (None: it plays)
    started_ms = 0.0
    points: list[Settled] = []
    spoke_on = False
    judging = False  # the reply is paused and nothing has settled the speech since (partials judge)
    for at in range(0, min(end, len(voice)), CHUNK):
        n = min(CHUNK, len(voice) - at)
        out = np.zeros(n, np.float32)
        played_out = np.zeros(n, np.float32)
        if paused_ms is None and played < len(reply):
            take = min(n, len(reply) - played, len(heard_reply) - played)
            out[:take] = reply[played : played + take]
            played_out[:take] = heard_reply[played : played + take]
            played += take
        speaker[at + delay : at + delay + n] = played_out
        mic = voice[at : at + n] + gain * speaker[at : at + n]
        events = listener.feed(mic, out)
        if hearing.partials:
            hearing.asr.wait_partial()  # (read with the next chunk, as a session reads it)
        for heard in events:
            if heard.kind == "speech_started":
                started_ms = heard.audio_ms + TurnParams().prefix_padding_ms  # as ``agent.turns``
            elif heard.kind == "speech_confirmed" and paused_ms is None:
                paused_ms = heard.audio_ms
                judging = True
            elif heard.kind == "resumed":
                spoke_on = judging = True
            elif heard.kind == "partial" and judging and heard.text:
                points.append(
                    Settled(heard.text, heard.audio_ms - started_ms, evidence(heard).describe(), partial=True)
                )
            elif heard.kind in ("pause", "final") and paused_ms is not None:
                # a judge that has settled the speech judges again only if the user spoke on
                if spoke_on or not any(not p.partial for p in points):
                    points.append(
                        Settled(heard.text, heard.audio_ms - started_ms, evidence(heard).describe())
                    )
                spoke_on = judging = False
                if heard.kind == "final":
                    return True, points
        settled = [p for p in points if not p.partial]
        if paused_ms is not None and not settled and listener.audio_ms - paused_ms >= resume_ms:
            heard = listener.peek_heard()
            points.append(Settled(heard.text, heard.audio_ms - started_ms, evidence(heard).describe()))
            judging = False
    return paused_ms is not None, points


def telephone(audio: np.ndarray) -> np.ndarray:
    """``audio`` (16 kHz) as it comes out of a G.711 telephone line: 8 kHz, mu-law, and back."""
    from omnivox.audio.g711 import ulaw_decode, ulaw_encode
    from omnivox.audio.resample import resample

    narrow = ulaw_decode(ulaw_encode(resample(audio, RATE, 8000)))
    return resample(narrow, 8000, RATE)[: len(audio)].astype(np.float32)


def cases(voices: Iterable[str], kinds: Iterable[str]) -> list[tuple[str, str, str]]:
    """(kind, voice, what is said) for every case; noise bursts are espeak-ng's whatever the voice."""
    out: list[tuple[str, str, str]] = []
    for voice in voices:
        for kind in kinds:
            said = {"echo": ("",), "backchannel": BACKCHANNELS, "noise": NOISES, "barge_in": BARGE_INS}[kind]
            out += [(kind, voice, s) for s in said]
    return out


def errors(observations: list[Observation], policy: InterruptionPolicy) -> tuple[int, int, int]:
    """(false barge-ins, missed barge-ins, late barge-ins) under ``policy``; a late one is cut at a
    later point than the words alone cut it (the reply resumed on a first word, then was cut)."""
    words_only = InterruptionPolicy(evidence=False)
    false = missed = late = 0
    for o in observations:
        verdict = o.judged_by(policy)
        if o.kind in FALSE_IF_CUT and verdict == Verdict.WORDS.value:
            false += 1
        elif o.kind == "barge_in" and verdict != Verdict.WORDS.value:
            missed += 1
        elif o.kind == "barge_in" and (o.cut_at(policy) or 0) > (o.cut_at(words_only) or 0):
            late += 1
    return false, missed, late


def fit(observations: list[Observation], miss_weight: float = 3.0) -> InterruptionPolicy:
    """The thresholds with the least weighted errors on ``observations`` (see the module doc)."""

    def cost(policy: InterruptionPolicy) -> tuple[float, int, int]:
        false, missed, late = errors(observations, policy)
        return false + miss_weight * missed, late, _resumed_on_evidence(observations, policy)

    base = InterruptionPolicy(
        witness_margin_min=WITNESS_OFF,
        no_speech_logprob_max=OFF,
        no_speech_high_logprob_max=OFF,
        unclear_logprob_max=OFF,
        unclear_over_echo_db_max=OFF,
        unclear_single_logprob_max=OFF,
    )
    # the no-speech boundary's two steps, each fitted given the other, the surer one first (a
    # first step fitted alone takes what it can at any P(no speech) and leaves the cases only a
    # second step could take with it), then each again
    best = base
    for _ in range(2):
        # the second step: a surer P(no speech) with surer words (off: log-probability OFF), never
        # words as sure as -0.5 (Whisper's real "Stop." -0.35 and "actually" -0.49 came at P(no
        # speech) 0.62-0.67: above -0.5 the words are the evidence, whatever the sound scores)
        best = _centre(
            [replace(best, no_speech_high_min=1.0, no_speech_high_logprob_max=OFF)]
            + [
                replace(best, no_speech_high_min=p, no_speech_high_logprob_max=lp)
                for p, lp in itertools.product(_steps(0.5, 0.95, 0.01), _steps(-1.0, -0.5, 0.02))
                if p > best.no_speech_min and lp > best.no_speech_logprob_max
            ],
            cost,
            ("no_speech_high_min", "no_speech_high_logprob_max"),
            off=("no_speech_high_logprob_max",),
        )
        best = _centre(
            [
                replace(best, no_speech_min=p, no_speech_logprob_max=lp)
                for p, lp in itertools.product(_steps(0.3, 0.95, 0.05), [OFF, *_steps(-2.5, -0.2, 0.1)])
                if best.no_speech_high_logprob_max == OFF
                or (p < best.no_speech_high_min and lp < best.no_speech_high_logprob_max)
            ],
            cost,
            ("no_speech_min", "no_speech_logprob_max"),
            off=("no_speech_logprob_max",),
        )
    # unclear: two or three words, and a lone word (which only a surer score than theirs can add to)
    best = _centre(
        [
            replace(best, unclear_logprob_max=lp, unclear_single_logprob_max=one)
            for lp, one in itertools.product([OFF, *_steps(-2.0, 0.0, 0.1)], [OFF, *_steps(-2.0, 0.0, 0.01)])
            if one == OFF or one > lp
        ],
        cost,
        ("unclear_logprob_max", "unclear_single_logprob_max"),
    )
    best = _centre(
        [replace(best, unclear_over_echo_db_max=db) for db in [OFF, *_steps(-30.0, 0.0, 1.0)]],
        cost,
        ("unclear_over_echo_db_max",),
    )
    # the backchannel witness, given the rest: it takes what their scores cannot, Whisper sure of
    # wrong words
    # (the words as sure as the witness needs: it says nothing of a sound Whisper wrote garbage on)
    best = _centre(
        [replace(best, witness_margin_min=WITNESS_OFF)]
        + [
            replace(best, witness_margin_min=m, witness_logprob_min=lp)
            for m, lp in itertools.product(_steps(-3.0, 1.0, 0.05), _steps(-1.5, -0.3, 0.1))
        ],
        cost,
        ("witness_margin_min", "witness_logprob_min"),
        off=("witness_margin_min",),
        off_value=WITNESS_OFF,
    )
    return best


OFF = -99.0  # a threshold no evidence reaches: the rule is off
FITTED = (
    "no_speech_min",
    "no_speech_logprob_max",
    "no_speech_high_min",
    "no_speech_high_logprob_max",
    "unclear_logprob_max",
    "unclear_over_echo_db_max",
    "unclear_single_logprob_max",
    "witness_margin_min",
    "witness_logprob_min",
)


def _resumed_on_evidence(observations: list[Observation], policy: InterruptionPolicy) -> int:
    """Cases the evidence rules resume (no_speech, unclear): of thresholds that make as few errors,
    the ones that lean on the evidence least are kept (a real barge-in lost is the worse mistake)."""
    lean = (Verdict.NO_SPEECH.value, Verdict.UNCLEAR.value, Verdict.SOUNDS_BACKCHANNEL.value)
    return sum(o.judged_by(policy) in lean for o in observations)


def _centre(
    candidates: list[InterruptionPolicy],
    cost: Callable[[InterruptionPolicy], tuple[float, int, int]],
    names: tuple[str, ...],
    off: tuple[str, ...] | None = None,
    off_value: float = OFF,
) -> InterruptionPolicy:
    """Of the candidates with the least cost (errors, then late cuts, then resumes on evidence),
    and of those the
    ones with the most rules off (a rule the cases do not need is not guessed), the one nearest the
    median of each threshold."""
    costs = [cost(c) for c in candidates]
    least = min(costs)
    best = [c for c, k in zip(candidates, costs, strict=True) if k == least]
    switches = names if off is None else off  # the thresholds whose OFF turns a rule off

    def n_off(c: InterruptionPolicy) -> int:
        return sum(getattr(c, n) == off_value for n in switches)

    most_off = max(n_off(c) for c in best)
    best = [c for c in best if n_off(c) == most_off]
    medians = {n: float(np.median([getattr(c, n) for c in best])) for n in names}
    return min(best, key=lambda c: sum(abs(getattr(c, n) - m) for n, m in medians.items()))


def _steps(lo: float, hi: float, step: float) -> list[float]:
    return [round(lo + i * step, 3) for i in range(round((hi - lo) / step) + 1)]


def run(args: argparse.Namespace) -> int:
    words_only = InterruptionPolicy(evidence=False)
    observations = (
        [o for path in args.observations for o in load(path)] if args.observations else hear(args, words_only)
    )
    observations += [o for path in args.conversations for o in from_conversation(path)]
    fitted = fit(observations, args.miss_weight)
    # the defaults of a session on the cases' line (``--observations`` from another line: say it)
    defaults = InterruptionPolicy(line=Line.PHONE if args.line == "g711" else Line.WIDEBAND)
    policies = {"words only": words_only, "defaults": defaults, "fitted": fitted}
    if any(p.partial for o in observations for p in o.points):  # every partial cutting beside
        policies["every partial cuts"] = replace(defaults, partial_wait_ms=0.0)
    rows = []
    for name, policy in policies.items():
        for kind in args.kinds:
            mine = [o for o in observations if o.kind == kind]
            verdicts = Counter(o.judged_by(policy) for o in mine)
            cut = verdicts.get(Verdict.WORDS.value, 0)
            rows.append(
                [name, kind, f"{cut}/{len(mine)}", ", ".join(f"{v} {c}" for v, c in sorted(verdicts.items()))]
            )
    print_table(
        f"Speech over a reply (hibari, {getattr(args, 'line', 'wide')}, {args.delay_ms:.0f} ms, "
        f"{' / '.join(f'{g:g}' for g in args.gains_db)} dB), "
        f"judged on the real hearing; thresholds fitted (a miss weighs {args.miss_weight:g})",
        ["judge", "case", "cut", "verdicts"],
        rows,
    )
    chosen = {k: getattr(fitted, k) for k in FITTED}
    for name, policy in policies.items():
        false, missed, late = errors(observations, policy)
        print(f"{name}: false barge-ins {false}, missed barge-ins {missed}, cut late {late}")
    print(f"fitted: {chosen}")
    write_json(
        getattr(args, "json", None),
        {"bench": "interruptions", "fitted": chosen, "observations": [asdict(o) for o in observations]},
    )
    return 0


def hear(args: argparse.Namespace, words_only: InterruptionPolicy) -> list[Observation]:
    """Every case heard by the server's hearing, printed with its words and evidence."""
    from omnivox.bench.turns import synthetic_voices, trim

    hearing = Hearing(getattr(args, "partials", False))
    voices = synthetic_voices()
    line = telephone if args.line == "g711" else (lambda a: a)
    reply = trim(voices["hibari"](REPLY))
    echo = line(reply)
    speak: dict[str, Callable[[str], np.ndarray]] = {v: voices[v] for v in args.voices}
    observations: list[Observation] = []
    for gain in args.gains_db:
        for kind, voice, said in cases(args.voices, args.kinds):
            clip = None
            if kind != "echo":
                clip = line(trim((voices["espeak"] if kind == "noise" else speak[voice])(said)))
            paused, points = hear_case(
                hearing, reply, clip, gain_db=gain, delay_ms=args.delay_ms, at_s=args.at_s, echo=echo
            )
            o = Observation(kind, voice, said, gain, paused, points)
            observations.append(o)
            heard = " | ".join(f"{p.text!r} {p.evidence}" for p in points)
            print(
                f"{kind:11} {voice:6} {gain:5.0f} dB {said!r:45} -> {o.judged_by(words_only):11} {heard}",
                flush=True,
            )
    return observations


def load(path: str) -> list[Observation]:
    """The cases an earlier run wrote with ``--json``."""
    with open(path) as f:
        saved = json.load(f)["observations"]
    return [Observation(**{**o, "points": [Settled(**p) for p in o["points"]]}) for o in saved]


def from_conversation(path: str) -> list[Observation]:
    """The interjections a ``bench conversation --json`` run judged live, as cases: each backchannel,
    noise burst and barge-in turn whose speech the server judged, with every judgement of the turn
    as a point (the run's own policy resumed the points before its last). Echo turns are left out:
    their judgements mix the echo with the caller's next question (a reply the server still thought
    playing). The events carry no speech length: the voiced ms stands for it (a lower bound; only
    the backchannel limit, 1.5 s, reads it). What was said is the run's script, by the turn's
    place among its kind (``bench.conversation``'s cycles), unless the trace names it."""
    from omnivox.bench import conversation

    with open(path) as f:
        saved = json.load(f)
    script = {"backchannel": conversation.BACKCHANNELS, "noise": conversation.NOISES}
    script["barge_in"] = conversation.BARGE_INS
    out: list[Observation] = []
    for voice, tally in saved["conversation"].items():
        seen: Counter[str] = Counter()
        for turn in tally["trace"]:
            kind = turn["event"]
            if kind not in script:
                continue
            said = turn.get("said") or script[kind][seen[kind] % len(script[kind])]
            seen[kind] += 1
            points = [Settled(text, e.get("voiced_ms", 0.0), e) for _, text, e in turn["judged"]]
            if points:
                out.append(Observation(kind, voice, said, saved["args"]["gain_db"], True, points))
    return out
