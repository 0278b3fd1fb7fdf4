"""Noise reduction: word error rate and false speech on noisy input, with and without the suppressor.

Speech: the 8 complete sentences of ``bench turns`` said by hibari and by espeak-ng, each mixed with
noise at ``--snr-db`` (10, 5 and 0 dB: the noise's power against the speech's over the speech):

- babble: the two voices saying other sentences at once, looped;
- pink: 1/f noise;
- fan: a 50 Hz hum with its harmonics over low-passed noise (a fan, a mains hum).

Each mix is heard as the server hears it: through the suppressor (``noise_reduction`` none,
``near_field``, ``far_field``) in 40 ms chunks, then Whisper tiny.en; WER is over all 16 sentences,
the mean over ``--offsets`` placements of the noise under them (3 by default).
False speech: 5 s of each noise alone, at the level it has at 0 dB SNR, through silero and the turn
detector (server VAD, 150 ms voiced to confirm): how often it starts or confirms a turn (a false
barge-in over a reply). CPU: the suppressor's time per second of audio (the share of one core a
session takes).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from omnivox.bench.table import print_table, write_json
from omnivox.bench.turns import COMPLETE, RATE, DeafAsr, synthetic_voices, trim
from omnivox.voice.asr.base import word_error_rate
from omnivox.voice.listener import Listener
from omnivox.voice.noise.suppressor import NoiseSuppressor
from omnivox.voice.vad.turn import TurnParams

BABBLE = (
    "The train leaves at half past nine from the north station.",
    "I think we should paint the kitchen a lighter colour this spring.",
    "Could you pass me the salt and the pepper please.",
    "They walked along the river until the sun went down.",
)
NOISES = ("babble", "pink", "fan")
CHUNK = RATE * 40 // 1000
OFFSET_STEPS = (12345, 7777, 3131, 24680, 999)  # where each sentence's noise starts: i * step samples


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--snr-db", nargs="+", type=float, default=[10.0, 5.0, 0.0])
    parser.add_argument("--noises", nargs="+", default=list(NOISES), choices=NOISES)
    parser.add_argument("--reduction", nargs="+", default=["none", "near_field", "far_field"])
    parser.add_argument(
        "--offsets",
        type=int,
        default=3,
        help="placements of the noise under each sentence (WER is their mean)",
    )


def pink(n: int, rng: np.random.Generator) -> np.ndarray:
    """1/f noise: white noise shaped by 1/sqrt(f) in the frequency domain."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(len(spectrum))
    spectrum[1:] /= np.sqrt(f[1:])
    spectrum[0] = 0
    return np.fft.irfft(spectrum, n).astype(np.float32)


def fan(n: int, rng: np.random.Generator) -> np.ndarray:
    """A 50 Hz hum and its harmonics over low-passed noise."""
    t = np.arange(n) / RATE
    hum = sum(np.sin(2 * np.pi * 50 * k * t + k) / k for k in range(1, 8))
    spectrum = np.fft.rfft(rng.standard_normal(n))
    freqs = np.fft.rfftfreq(n, 1 / RATE)
    spectrum /= 1 + (freqs / 400) ** 2  # a fan's roar: most of it under 400 Hz
    return (hum + 3 * np.fft.irfft(spectrum, n) / np.sqrt(np.mean(np.fft.irfft(spectrum, n) ** 2))).astype(
        np.float32
    )


def noise_source(kind: str, say: dict[str, Callable[[str], np.ndarray]], seconds: float = 30.0) -> np.ndarray:
    rng = np.random.default_rng(7)
    n = int(seconds * RATE)
    if kind == "pink":
        return pink(n, rng)
    if kind == "fan":
        return fan(n, rng)
    # babble: each voice says the sentences one after another; both at once
    streams = []
    for name, fn in say.items():
        order = BABBLE if name == "hibari" else BABBLE[::-1]
        streams.append(np.concatenate([trim(fn(s)) for s in order]))
    length = min(len(s) for s in streams)
    mixed = sum(s[:length] for s in streams)
    return np.resize(np.asarray(mixed, np.float32), n)


def mix(speech: np.ndarray, noise: np.ndarray, snr_db: float, offset: int) -> np.ndarray:
    """``speech`` with noise at ``snr_db`` (over the speech), half a second of it on each side."""
    pad = RATE // 2
    clip = np.concatenate([np.zeros(pad, np.float32), speech, np.zeros(pad, np.float32)])
    part = np.resize(np.roll(noise, -offset), len(clip))
    gain = np.sqrt(np.mean(speech**2) / np.mean(part**2) / 10 ** (snr_db / 10))
    return (clip + gain * part).astype(np.float32)


def suppressed(audio: np.ndarray, kind: str) -> tuple[np.ndarray, float]:
    """``audio`` through the suppressor in 40 ms chunks (as the session feeds it), and its time."""
    if kind == "none":
        return audio, 0.0
    ns = NoiseSuppressor(kind)  # type: ignore[arg-type]
    began = time.process_time()
    out = np.concatenate([ns.process(audio[i : i + CHUNK]) for i in range(0, len(audio), CHUNK)])
    return out, time.process_time() - began


def false_speech(vad: Any, noise: np.ndarray, level: float, kind: str) -> tuple[int, int]:
    """(turns started, turns confirmed) by 5 s of ``noise`` alone at RMS ``level``."""
    clip = noise[: 5 * RATE] * level / np.sqrt(np.mean(noise[: 5 * RATE] ** 2))
    audio, _ = suppressed(clip.astype(np.float32), kind)
    vad.reset()
    listener = Listener(
        vad, DeafAsr(), TurnParams(silence_duration_ms=500), confirm_ms=150, speculate_at=None
    )
    kinds = [h.kind for i in range(0, len(audio), CHUNK) for h in listener.feed(audio[i : i + CHUNK])]
    return kinds.count("speech_started"), kinds.count("speech_confirmed")


def run(args: argparse.Namespace) -> int:
    from omnivox.voice.asr.whisper_asr import WhisperAsr
    from omnivox.voice.vad.silero import SileroVad

    asr, vad = WhisperAsr(), SileroVad(RATE)
    say = synthetic_voices()
    speech = [(v, text, trim(fn(text))) for v, fn in say.items() for text in COMPLETE]
    speech_rms = float(np.sqrt(np.mean(np.concatenate([s for _, _, s in speech]) ** 2)))
    results: dict[str, Any] = {}
    rows = []

    def wer_of(clips: list[np.ndarray], kind: str) -> tuple[float, float, float]:
        errors = words = 0.0
        cpu = audio_s = 0.0
        for (_, text, _), clip in zip(speech, clips, strict=True):
            heard, spent = suppressed(clip, kind)
            cpu, audio_s = cpu + spent, audio_s + len(clip) / RATE
            n = len(text.split())
            errors += word_error_rate(text, asr.transcribe(heard).text) * n
            words += n
        return errors / words, cpu / audio_s, audio_s

    clean = [mix(s, np.zeros(RATE, np.float32) + 1e-9, 200.0, 0) for _, _, s in speech]
    for kind in args.reduction:
        wer, cpu, _ = wer_of(clean, kind)
        results[f"clean/{kind}"] = {"wer": wer, "cpu": cpu}
        rows.append(["clean", "-", kind, wer, "", "", cpu * 100])
    for noise_kind in args.noises:
        noise = noise_source(noise_kind, say)
        for snr in args.snr_db:
            # where the noise falls under each sentence moves Whisper tiny.en's WER by up to 0.08 on
            # these 134 words (0.25-0.32 for one suppressor): the mean over placements compares them
            placements = [
                [mix(s, noise, snr, i * step) for i, (_, _, s) in enumerate(speech)]
                for step in OFFSET_STEPS[: args.offsets]
            ]
            for kind in args.reduction:
                measured = [wer_of(clips, kind) for clips in placements]
                wer = float(np.mean([m[0] for m in measured]))
                cpu = float(np.mean([m[1] for m in measured]))
                started, confirmed = (
                    false_speech(vad, noise, speech_rms, kind) if snr == args.snr_db[-1] else ("", "")
                )
                results[f"{noise_kind}/{snr:g}/{kind}"] = {
                    "wer": wer,
                    "cpu": cpu,
                    "noise_alone_started": started,
                    "noise_alone_confirmed": confirmed,
                }
                rows.append([noise_kind, snr, kind, wer, started, confirmed, cpu * 100])
                print(rows[-1], flush=True)
    print_table(
        f"Noise reduction: WER of Whisper tiny.en on {len(speech)} sentences (hibari, espeak-ng) mixed "
        "with noise; noise alone (5 s at the speech's level) through silero + server VAD",
        ["noise", "SNR dB", "noise_reduction", "WER", "noise alone: started", "confirmed", "CPU % of a core"],
        rows,
    )
    write_json(getattr(args, "json", None), {"bench": "noise", "results": results})
    return 0
