"""End-of-turn decisions on a scripted set: semantic_vad at each eagerness against server_vad.

Two kinds of turn, spoken by hibari and by espeak-ng:

- complete: a whole sentence, then silence. Right when the turn ends on the model's word (before
  the eagerness's longest wait); the wait is from the end of the speech to the end of the turn.
- paused: a sentence cut by a one-second pause mid-clause ("My phone number is five five five ...
  one two three four."). Right when the turn does not end in the pause.

The real listener runs (silero VAD, the turn detector, Whisper tiny.en flushed at each pause,
smart-turn at each pause) on the audio in 20 ms frames; everything is in audio time, so the figures
do not depend on the machine's speed. ``--line g711`` passes every clip through a telephone line
first (8 kHz, G.711 mu-law, back to 16 kHz); ``--words off`` judges pauses on smart-turn alone (as
before the words were weighed); ``--asr none`` hears no words at all.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from omnivox.audio.resample import resample
from omnivox.audio.wav import read_wav
from omnivox.bench.asr import phone_copy
from omnivox.bench.table import print_table, write_json
from omnivox.voice.asr.base import Hypothesis, StreamingAsr
from omnivox.voice.listener import Listener
from omnivox.voice.vad.turn import TurnParams

RATE = 16000
COMPLETE = (
    "What is the weather like in Paris today?",
    "Can you tell me a short story about a fox?",
    "Please remind me to call my sister tomorrow.",
    "How long does it take to boil an egg?",
    "I would like to book a table for four people.",
    "Turn on the light in the kitchen.",
    "Thank you, that's all.",
    "My phone number is five five five one two three four.",
)
PAUSED = (
    ("My phone number is five five five", "one two three four."),
    ("I would like to order a pizza with", "extra cheese and olives."),
    ("So I was thinking that maybe we could", "go to the beach tomorrow."),
    ("Can you remind me to", "call my sister tomorrow?"),
    ("The meeting is on", "Thursday at three."),
    ("I need a table for", "four people tonight."),
    ("Well, um,", "I am not sure."),
    ("What I really want to know is", "how long it takes to boil an egg."),
)
PAUSE_S = 1.0
MODES = ("server_vad", "low", "medium", "high")
LINES = ("wide", "g711")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--modes", nargs="+", default=list(MODES), help="server_vad and/or eagerness levels")
    parser.add_argument("--pause-s", type=float, default=PAUSE_S, help="the pause inside a paused sentence")
    parser.add_argument("--line", nargs="+", default=["wide"], choices=LINES, help="wide and/or g711")
    parser.add_argument("--words", default="on", choices=["on", "off"], help="weigh the transcript's words")
    parser.add_argument("--asr", default="whisper", choices=["whisper", "none"], help="the recogniser")
    parser.add_argument("--voices", nargs="+", default=["hibari", "espeak"], help="hibari, espeak")
    parser.add_argument(
        "--transcripts", action="store_true", help="print each clip got wrong: its words, P(finished), tier"
    )


class DeafAsr(StreamingAsr):
    """A recogniser that hears nothing: the decisions do not depend on the words recognised."""

    def _process(self, audio: np.ndarray) -> Hypothesis | None:
        return None

    def _end(self) -> Hypothesis:
        return ("", ())


def synthetic_voices() -> dict[str, Any]:
    from omnivox.voice.tts.hibari import HibariTts

    tts = HibariTts(seed=0, threads=1)

    def hibari(text: str) -> np.ndarray:
        return resample(np.concatenate([c.audio for c in tts.synthesize(text)]), tts.sample_rate, RATE)

    voices: dict[str, Any] = {"hibari": hibari}
    exe = shutil.which("espeak-ng")
    if exe is not None:

        def espeak(text: str) -> np.ndarray:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "s.wav"
                subprocess.run(
                    [exe, "-v", "en-us+klatt", "-w", str(path), text], check=True, capture_output=True
                )
                audio, rate = read_wav(path)
            return resample(audio, rate, RATE)

        voices["espeak"] = espeak
    return voices


def trim(audio: np.ndarray) -> np.ndarray:
    loud = np.nonzero(np.abs(audio) > 0.02)[0]
    return audio[loud[0] : loud[-1] + 1] if len(loud) else audio


def quiet(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)


def first_stop_ms(listener: Listener, audio: np.ndarray) -> float | None:
    """Stream time at which the listener first ended a turn (None: it never did)."""
    frame = RATE // 50
    for i in range(0, len(audio), frame):
        for heard in listener.feed(audio[i : i + frame]):
            if heard.kind == "speech_stopped":
                return (i + len(audio[i : i + frame])) * 1000 / RATE
    return None


def _listener(mode: str, vad: Any, model: Any, asr: StreamingAsr, words: bool) -> tuple[Listener, float]:
    vad.reset()
    asr.reset()
    if mode == "server_vad":
        params, longest = TurnParams(silence_duration_ms=500), 500.0
    else:
        params = TurnParams(eagerness=mode)
        longest = float(params.silence_duration_ms)
    listener = Listener(vad, asr, params, confirm_ms=150, end_of_turn=model, turn_words=words)
    if listener.semantic is not None:
        longest = listener.semantic.max_ms
    return listener, longest


def _judged(listener: Listener) -> list[dict[str, Any]]:
    scores = listener.semantic.scores if listener.semantic is not None else []
    return [
        {"p": round(s.probability, 3), "text": s.text, "words_complete": s.words_complete, "tier": s.tier}
        for s in scores
    ]


def run(args: argparse.Namespace) -> int:
    from omnivox.voice.turn.smart_turn import SmartTurn
    from omnivox.voice.vad.silero import SileroVad

    vad, model = SileroVad(RATE), SmartTurn()
    asr: StreamingAsr = DeafAsr()
    if args.asr == "whisper":
        from omnivox.voice.asr.whisper_asr import WhisperAsr

        asr = WhisperAsr()
    words = args.words == "on"
    voices = synthetic_voices()
    lead = quiet(0.5)
    rows, results = [], {}
    for voice, line, say in ((v, ln, voices[v]) for v in args.voices for ln in args.line):
        over = phone_copy if line == "g711" else (lambda a: a)
        complete = [over(trim(say(t))) for t in COMPLETE]
        paused = [(over(trim(say(a))), over(trim(say(b)))) for a, b in PAUSED]
        for mode in args.modes:
            waits, complete_right, paused_right = [], 0, 0
            judged: list[list[dict[str, Any]]] = []  # each clip's pauses, as the listener judged them
            wrong: list[tuple[str, Any, list[dict[str, Any]]]] = []  # (why, what was said, its pauses)
            for text, speech in zip(COMPLETE, complete, strict=True):
                listener, longest = _listener(mode, vad, model, asr, words)
                stop = first_stop_ms(listener, np.concatenate([lead, speech, quiet(longest / 1000 + 1.0)]))
                end_ms = (len(lead) + len(speech)) * 1000 / RATE
                wait = (stop - end_ms) if stop is not None else float("nan")
                waits.append(wait)
                on_time = mode == "server_vad" or wait < longest - 50
                complete_right += int(on_time)
                judged.append(_judged(listener))
                if not on_time:
                    wrong.append((f"complete, ended {wait:.0f} ms after it", text, judged[-1]))
            for pair, (first, rest) in zip(PAUSED, paused, strict=True):
                listener, longest = _listener(mode, vad, model, asr, words)
                audio = np.concatenate([lead, first, quiet(args.pause_s), rest, quiet(longest / 1000 + 1.0)])
                stop = first_stop_ms(listener, audio)
                resumed_ms = (len(lead) + len(first)) * 1000 / RATE + args.pause_s * 1000
                kept = stop is not None and stop > resumed_ms
                paused_right += int(kept)
                judged.append(_judged(listener))
                if not kept:
                    wrong.append(("paused, ended in the pause", pair, judged[-1]))
            total = len(complete) + len(paused)
            r = {
                "complete_right": complete_right / len(complete),
                "paused_right": paused_right / len(paused),
                "right": (complete_right + paused_right) / total,
                "mean_wait_ms": statistics.fmean(waits),
                "waits_ms": waits,
                "judged": judged,
            }
            results[f"{voice}/{line}/{mode}"] = r
            if args.transcripts:
                for why, said, pauses in wrong:  # why each went wrong: the words and the model at each pause
                    print(f"{voice}/{line}/{mode} {why}: {said!r} -> {pauses}")
            rows.append(
                [
                    voice,
                    line,
                    mode,
                    r["right"],
                    r["complete_right"],
                    r["mean_wait_ms"],
                    max(waits),
                    r["paused_right"],
                ]
            )
    print_table(
        f"End-of-turn decisions: {len(COMPLETE)} complete sentences, {len(PAUSED)} with a "
        f"{args.pause_s:g} s pause mid-clause; words {args.words}, ASR {args.asr}",
        [
            "voice",
            "line",
            "turn detection",
            "right",
            "complete: ended early",
            "mean wait ms",
            "max wait ms",
            "paused: kept",
        ],
        rows,
    )
    write_json(
        getattr(args, "json", None),
        {"bench": "turns", "args": {k: v for k, v in vars(args).items() if k != "json"}, "results": results},
    )
    return 0
