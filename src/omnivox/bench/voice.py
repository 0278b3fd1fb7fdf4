"""Speed of the embedded voice models on one core: ASR (pocketsphinx), TTS (hibari), VAD (silero).

- ASR: speech synthesised by hibari, resampled to 16 kHz and fed in 20 ms frames as a live stream
  arrives, with the partial hypothesis computed after every frame as a session does. Reported: the
  real-time factor (processing time / audio time) of one stream, the streams one core could hold by
  that figure (1 / RTF), and the same measured directly: K decoders fed round-robin, one 20 ms frame
  each in turn, in one thread; the largest K whose total processing time stays under the audio's
  duration is what one core holds at real time (per-stream overheads and cache effects included).
- TTS: text streamed word by word by an LLM (the echo LLM saying it) through ``produce_reply``, the
  producer every spoken reply of the server goes through (words -> sentences -> cleaned text ->
  TTS); time to first audio and real-time factor, for a short and a long sentence (median of the
  repeats).
- VAD: cost of scoring one 32 ms window (mean and p99, microseconds) and that as a fraction of the
  window's duration.

Everything runs in this one thread with single-threaded models, so the figures are per core.
"""

from __future__ import annotations

import argparse
import re
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from omnivox.audio.resample import resample
from omnivox.bench.table import percentile, print_table, write_json
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.asr.base import StreamingAsr, word_error_rate
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.echo_llm import EchoLlm
from omnivox.voice.reply import ReplyRequest, Spoken, produce_reply
from omnivox.voice.tts.base import StreamingTts
from omnivox.voice.vad.base import VoiceActivityDetector

ASR_RATE = 16000
ASR_TEXT = (
    "Good morning, I would like to book a table for four people tomorrow evening at seven. "
    "We would prefer a quiet corner near the window, and one of us needs a vegetarian menu. "
    "Could you also tell me whether there is parking close to the restaurant?"
)
SHORT_TEXT = "Sure, I can help with that."
LONG_TEXT = (
    "The train to the coast leaves every hour from the main station, and if you buy your ticket "
    "online before nine in the morning you can save almost half of the price of a regular fare."
)
_LEAD_S = 0.3  # silence around the speech, as a VAD-cut utterance has


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--asr-text", default=ASR_TEXT, help="what hibari says for the ASR measurements")
    parser.add_argument("--short-text", default=SHORT_TEXT, help="the short TTS sentence")
    parser.add_argument("--long-text", default=LONG_TEXT, help="the long TTS sentence")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (median kept)")
    parser.add_argument("--frame-ms", type=float, default=20.0, help="ASR frame size, as a client sends")
    parser.add_argument("--max-streams", type=int, default=32, help="most concurrent ASR streams tried")
    parser.add_argument("--no-streams", action="store_true", help="skip the measured concurrent streams")
    parser.add_argument("--vad-windows", type=int, default=3000, help="VAD windows timed")


# ---- inputs


def speech_16k(tts: StreamingTts, text: str) -> np.ndarray:
    """``text`` spoken by ``tts``, at 16 kHz, with a little silence before and after."""
    audio = np.concatenate([c.audio for c in tts.synthesize(text)])
    pad = np.zeros(int(_LEAD_S * tts.sample_rate), np.float32)
    return resample(np.concatenate([pad, audio, pad]), tts.sample_rate, ASR_RATE)


def frames(audio: np.ndarray, rate: int, frame_ms: float) -> list[np.ndarray]:
    step = max(1, int(rate * frame_ms / 1000))
    return [audio[i : i + step] for i in range(0, len(audio), step)]


def llm_pieces(text: str) -> list[str]:
    """``text`` as an LLM streams it: one word (with its trailing space) per piece."""
    return re.findall(r"\S+\s*", text)


# ---- ASR


def measure_asr(
    asr: StreamingAsr, audio: np.ndarray, frame_ms: float = 20.0, reference: str | None = None
) -> dict[str, Any]:
    """One stream: feed ``audio`` frame by frame (partials included), flush; time all of it."""
    chunks = frames(audio, asr.sample_rate, frame_ms)
    asr.reset()
    partials = 0
    start = time.perf_counter()
    for chunk in chunks:
        if asr.feed(chunk) is not None:
            partials += 1
    final = asr.flush()
    process_s = time.perf_counter() - start
    audio_s = len(audio) / asr.sample_rate
    rtf = process_s / audio_s
    return {
        "audio_s": audio_s,
        "process_s": process_s,
        "rtf": rtf,
        "streams_per_core": 1.0 / rtf,
        "partials": partials,
        "text": final.text,
        "wer": word_error_rate(reference, final.text) if reference is not None else None,
    }


def run_streams(decoders: Sequence[StreamingAsr], audio: np.ndarray, frame_ms: float = 20.0) -> float:
    """Feed every decoder the same stream, interleaved frame by frame; seconds it all took."""
    chunks = frames(audio, decoders[0].sample_rate, frame_ms)
    for asr in decoders:
        asr.reset()
    start = time.perf_counter()
    for chunk in chunks:
        for asr in decoders:
            asr.feed(chunk)
    for asr in decoders:
        asr.flush()
    return time.perf_counter() - start


def measure_asr_streams(
    make_asr: Callable[[], StreamingAsr],
    audio: np.ndarray,
    start: int,
    max_streams: int,
    frame_ms: float = 20.0,
) -> dict[str, Any]:
    """The most streams one thread keeps at real time, found by stepping from ``start``.

    Steps up while K streams fit (processing time < audio time) and down while they do not; stops at
    the boundary or at 1 / ``max_streams``. ``streams`` is 0 if not even one fits.
    """
    decoders: list[StreamingAsr] = []
    audio_s = len(audio) / ASR_RATE
    trials: dict[int, dict[str, Any]] = {}

    def fits(k: int) -> bool:
        while len(decoders) < k:
            decoders.append(make_asr())
        process_s = run_streams(decoders[:k], audio, frame_ms)
        trials[k] = {"streams": k, "process_s": process_s, "load": process_s / audio_s}
        return process_s < audio_s

    k = min(max(1, start), max_streams)
    if fits(k):
        while k < max_streams and fits(k + 1):
            k += 1
    else:
        k -= 1
        while k >= 1 and not fits(k):
            k -= 1
    return {"streams": max(k, 0), "audio_s": audio_s, "trials": [trials[n] for n in sorted(trials)]}


# ---- TTS


def measure_tts(tts: StreamingTts, text: str, repeats: int = 3) -> dict[str, Any]:
    """Time to first audio and RTF of ``text`` streamed word by word through the reply producer."""
    pieces = llm_pieces(text)
    llm = EchoLlm(prefix="")  # streams the user's words back, one word per delta
    request = ReplyRequest([ChatMessage(role="user", content=text)], LlmParams(), speak=True)
    runs = []
    for _ in range(max(1, repeats)):
        first: float | None = None
        samples = 0
        start = time.perf_counter()
        for piece in produce_reply(llm, tts, request, threading.Event()):
            if not isinstance(piece, Spoken):
                continue
            if first is None:
                first = time.perf_counter() - start
            samples += len(piece.audio)
        total = time.perf_counter() - start
        audio_s = samples / tts.sample_rate
        runs.append((first if first is not None else total, total, audio_s))
    first_s = statistics.median(r[0] for r in runs)
    total_s = statistics.median(r[1] for r in runs)
    audio_s = statistics.median(r[2] for r in runs)
    return {
        "words": len(pieces),
        "audio_s": audio_s,
        "first_audio_ms": first_s * 1e3,
        "total_s": total_s,
        "rtf": total_s / audio_s if audio_s else float("nan"),
    }


# ---- VAD


def measure_vad(vad: VoiceActivityDetector, audio: np.ndarray, windows: int) -> dict[str, Any]:
    """Score ``windows`` windows of ``audio`` (repeated as needed) one call each; per-window cost."""
    n = vad.window_samples
    reps = -(-windows * n // max(len(audio), 1))
    stream = np.tile(audio, max(reps, 1))[: windows * n]
    vad.reset()
    costs = []
    for i in range(len(stream) // n):
        window = stream[i * n : (i + 1) * n]
        t0 = time.perf_counter_ns()
        vad.process(window)
        costs.append((time.perf_counter_ns() - t0) / 1e3)
    mean_us = statistics.fmean(costs)
    return {
        "windows": len(costs),
        "window_ms": vad.window_ms,
        "mean_us": mean_us,
        "p99_us": percentile(costs, 99),
        "rt_fraction": mean_us / (vad.window_ms * 1e3),
    }


# ---- the command


def run(args: argparse.Namespace) -> int:
    """Load the embedded models, measure, print the tables, optionally write JSON; exit code 0."""
    from omnivox.voice.asr.pocketsphinx_asr import PocketsphinxAsr
    from omnivox.voice.tts.hibari import HibariTts
    from omnivox.voice.vad.silero import SileroVad

    tts = HibariTts(seed=0, threads=1)
    asr = PocketsphinxAsr(ASR_RATE)
    vad = SileroVad(ASR_RATE)
    audio = speech_16k(tts, args.asr_text)
    measure_asr(asr, audio, args.frame_ms)  # warm-up: first decode pays for lazy set-up
    asr_runs = [measure_asr(asr, audio, args.frame_ms, args.asr_text) for _ in range(max(1, args.repeats))]
    asr_result = min(asr_runs, key=lambda r: abs(r["rtf"] - statistics.median(x["rtf"] for x in asr_runs)))
    streams = None
    if not args.no_streams:
        pool = iter([asr])  # the warm decoder is the first stream; the rest are loaded as needed
        streams = measure_asr_streams(
            lambda: next(pool, None) or PocketsphinxAsr(ASR_RATE),
            audio,
            start=int(asr_result["streams_per_core"]),
            max_streams=args.max_streams,
            frame_ms=args.frame_ms,
        )
    measure_tts(tts, args.short_text, 1)  # warm-up
    tts_results = {
        "short": measure_tts(tts, args.short_text, args.repeats),
        "long": measure_tts(tts, args.long_text, args.repeats),
    }
    vad_result = measure_vad(vad, audio, args.vad_windows)

    _print(args, asr_result, streams, tts_results, vad_result)
    write_json(
        getattr(args, "json", None),
        {
            "bench": "voice",
            "frame_ms": args.frame_ms,
            "asr": asr_result,
            "asr_streams": streams,
            "tts": tts_results,
            "vad": vad_result,
        },
    )
    return 0


def _print(
    args: argparse.Namespace,
    asr: dict[str, Any],
    streams: dict[str, Any] | None,
    tts: dict[str, dict[str, Any]],
    vad: dict[str, Any],
) -> None:
    print_table(
        f"ASR pocketsphinx, one stream, {args.frame_ms:g} ms frames at 16 kHz, partials on",
        ["audio s", "process s", "RTF", "streams/core (1/RTF)", "streams/core (measured)", "partials", "WER"],
        [
            [
                asr["audio_s"],
                asr["process_s"],
                asr["rtf"],
                asr["streams_per_core"],
                streams["streams"] if streams else "-",
                asr["partials"],
                asr["wer"],
            ]
        ],
    )
    if streams:
        print_table(
            "ASR concurrent streams, round-robin in one thread",
            ["streams", "process s", "audio s", "load (process/audio)", "real time"],
            [
                [
                    t["streams"],
                    t["process_s"],
                    streams["audio_s"],
                    t["load"],
                    "yes" if t["load"] < 1 else "no",
                ]
                for t in streams["trials"]
            ],
        )
    print_table(
        f"TTS hibari, fed word by word, median of {args.repeats}",
        ["sentence", "words", "audio s", "first audio ms", "RTF", "x real time"],
        [
            [name, r["words"], r["audio_s"], r["first_audio_ms"], r["rtf"], 1 / r["rtf"]]
            for name, r in tts.items()
        ],
    )
    print_table(
        "VAD silero, one window per call",
        ["window ms", "windows", "mean us", "p99 us", "fraction of real time"],
        [[vad["window_ms"], vad["windows"], vad["mean_us"], vad["p99_us"], vad["rt_fraction"]]],
    )
