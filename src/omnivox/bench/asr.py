"""Word error rate and cost of each embedded ASR backend, on several kinds of speech.

Corpora (every one is made here or found on this machine; nothing is downloaded):

- ``hibari``: the sentences spoken by hibari (neural TTS, the voice the tests use);
- ``espeak``: the same sentences by espeak-ng (Debian's formant synthesiser, ``en-us+klatt``);
- ``*-phone``: each of those as a telephone line carries it: 8 kHz G.711 mu-law, back to 16 kHz;
- ``human``: real recordings of a person, where a package ships some: Debian's ``alsa-utils``
  speaker-test clips (``/usr/share/sounds/alsa``: a man saying "Front Left", "Rear Center"...; 8 clips
  of two words), and any ``--human-dir`` folder of WAV files named by what they say.

Each clip is fed as a live stream (20 ms frames) and flushed, as a session hears it. WER is over the
corpus (all errors / all reference words); digits in a transcript count as the words they are read
as, one by one ("555-1234" is "five five five one two three four"), since Whisper writes numbers as
digits and the references spell them. "RTF final" is the cost without partials (the final
transcript only), "RTF live" with the backend's live partials (PocketSphinx's running hypothesis, or
Whisper re-transcribing the utterance so far every ``--partial-ms``).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from omnivox.audio.g711 import ulaw_decode, ulaw_encode
from omnivox.audio.resample import resample
from omnivox.audio.wav import read_wav
from omnivox.bench.table import print_table, write_json
from omnivox.voice.asr.base import StreamingAsr, normalize_words, word_error_rate

RATE = 16000
SENTENCES = (
    "what is the weather like in paris today",
    "can you tell me a short story about a fox",
    "please remind me to call my sister tomorrow",
    "how long does it take to boil an egg",
    "i would like to book a table for four people tomorrow evening at seven",
    "could you also tell me whether there is parking close to the restaurant",
    "turn on the light in the kitchen",
    "my phone number is five five five one two three four",
)
ALSA_DIR = Path("/usr/share/sounds/alsa")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backends", nargs="+", default=["pocketsphinx", "whisper"], help="pocketsphinx, whisper"
    )
    parser.add_argument("--human-dir", help="more real recordings: WAV files named by what they say")
    parser.add_argument("--partial-ms", type=int, default=1000, help="Whisper's live partial interval")
    parser.add_argument("--frame-ms", type=float, default=20.0, help="frame size, as a client sends")


# ---- corpora


def _hibari(texts: tuple[str, ...]) -> list[tuple[str, np.ndarray]]:
    from omnivox.voice.tts.hibari import HibariTts

    tts = HibariTts(seed=0, threads=1)
    return [
        (t, resample(np.concatenate([c.audio for c in tts.synthesize(t)]), tts.sample_rate, RATE))
        for t in texts
    ]


def _espeak(texts: tuple[str, ...]) -> list[tuple[str, np.ndarray]] | None:
    exe = shutil.which("espeak-ng")
    if exe is None:
        return None
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, text in enumerate(texts):
            path = Path(tmp) / f"{i}.wav"
            subprocess.run([exe, "-v", "en-us+klatt", "-w", str(path), text], check=True, capture_output=True)
            audio, rate = read_wav(path)
            out.append((text, resample(audio, rate, RATE)))
    return out


def phone_copy(audio: np.ndarray) -> np.ndarray:
    """``audio`` (16 kHz) as a telephone line carries it: 8 kHz G.711 mu-law, back at 16 kHz."""
    narrow = resample(audio, RATE, 8000)
    return resample(ulaw_decode(ulaw_encode(narrow)), 8000, RATE)


def _human(extra: str | None) -> list[tuple[str, np.ndarray]]:
    clips = []
    for folder in (ALSA_DIR, Path(extra) if extra else None):
        if folder is None or not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.wav")):
            text = " ".join(re.split(r"[_\-\s]+", path.stem)).lower()
            if text == "noise":
                continue  # speaker-test's noise burst says nothing
            audio, rate = read_wav(path)
            if audio.ndim > 1:
                audio = audio.mean(axis=1)
            clips.append((text, resample(audio.astype(np.float32), rate, RATE)))
    return clips


def corpora(human_dir: str | None) -> dict[str, list[tuple[str, np.ndarray]]]:
    found: dict[str, list[tuple[str, np.ndarray]]] = {}
    found["hibari"] = _hibari(SENTENCES)
    found["hibari-phone"] = [(t, phone_copy(a)) for t, a in found["hibari"]]
    espeak = _espeak(SENTENCES)
    if espeak is not None:
        found["espeak"] = espeak
        found["espeak-phone"] = [(t, phone_copy(a)) for t, a in espeak]
    human = _human(human_dir)
    if human:
        found["human"] = human
        found["human-phone"] = [(t, phone_copy(a)) for t, a in human]
    return found


# ---- measuring


_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def spoken_digits(text: str) -> str:
    """Each digit of ``text`` as its word ("555-1234" -> "five five five one two three four")."""
    return re.sub(r"\d", lambda m: f" {_DIGITS[int(m.group())]} ", text)


def _pad(audio: np.ndarray) -> np.ndarray:
    quiet = np.zeros(int(0.3 * RATE), np.float32)
    return np.concatenate([quiet, audio.astype(np.float32), quiet])


def run_corpus(asr: StreamingAsr, clips: list[tuple[str, np.ndarray]], frame_ms: float) -> dict[str, Any]:
    """Feed every clip as a live stream and flush it; corpus WER, processing time, audio time."""
    step = int(RATE * frame_ms / 1000)
    errors = words = 0.0
    busy = audio_s = 0.0
    heard = []
    for text, clip in clips:
        audio = _pad(clip)
        asr.reset()
        began = time.perf_counter()
        for i in range(0, len(audio), step):
            asr.feed(audio[i : i + step])
        final = spoken_digits(asr.flush().text)
        busy += time.perf_counter() - began
        audio_s += len(audio) / RATE
        n = len(normalize_words(text))
        errors += word_error_rate(text, final) * n
        words += n
        heard.append({"reference": text, "heard": final})
    return {"wer": errors / words if words else float("nan"), "rtf": busy / audio_s, "clips": heard}


def _backend(name: str, partials: bool, partial_ms: int) -> StreamingAsr:
    if name == "pocketsphinx":
        from omnivox.voice.asr.pocketsphinx_asr import PocketsphinxAsr

        return PocketsphinxAsr(RATE)  # its partials come with the decoding, whatever is asked
    from omnivox.voice.asr.whisper_asr import WhisperAsr

    # partials decoded inline: the clips are fed faster than real time, and the cost is what counts
    return WhisperAsr(
        sample_rate=RATE, partial_interval_ms=partial_ms if partials else None, background_partials=False
    )


def run(args: argparse.Namespace) -> int:
    found = corpora(args.human_dir)
    rows, results = [], {}
    for backend in args.backends:
        live = _backend(backend, True, args.partial_ms)
        final_only = live if backend == "pocketsphinx" else _backend(backend, False, args.partial_ms)
        run_corpus(final_only, found["hibari"][:1], args.frame_ms)  # warm-up
        for corpus, clips in found.items():
            final = run_corpus(final_only, clips, args.frame_ms)
            streamed = final if final_only is live else run_corpus(live, clips, args.frame_ms)
            results[f"{backend}/{corpus}"] = {"final": final, "live": streamed}
            rows.append(
                [backend, corpus, len(clips), final["wer"], streamed["wer"], final["rtf"], streamed["rtf"]]
            )
    print_table(
        f"ASR word error rate (Whisper partials every {args.partial_ms} ms)",
        ["backend", "corpus", "clips", "WER", "WER live", "RTF final", "RTF live"],
        rows,
    )
    if "human" not in found:
        print("\nno real recordings found: `apt-get install alsa-utils` puts some in /usr/share/sounds/alsa")
    write_json(getattr(args, "json", None), {"bench": "asr", "results": results})
    return 0
