"""A second speaker for the speech tests: espeak-ng, a formant synthesiser (a Debian package, not a wheel).

hibari is a neural voice; espeak-ng sounds nothing like it, so recognising both says more about the
recogniser than one voice does. espeak-ng writes 22.05 kHz WAV; ``espeak_ng`` returns float32 mono at
``rate`` through omnivox's own WAV reader and resampler. CI installs the package
(``apt-get install espeak-ng``); without it the tests that need it fail with that advice, they do
not skip.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from omnivox.audio.resample import resample
from omnivox.audio.wav import read_wav

# The Klatt variant of the US English voice. PocketSphinx recognises it far better than espeak-ng's
# default voice (measured: corpus WER about 0.15 against 0.6 to 0.9 for the default en-us voice).
ESPEAK_VOICE = "en-us+klatt"
MISSING = "espeak-ng is not installed: run `apt-get install espeak-ng` (CI installs it)"


def espeak_available() -> bool:
    return shutil.which("espeak-ng") is not None


def espeak_ng(
    text: str, voice: str = ESPEAK_VOICE, rate: int = 16000, words_per_minute: int = 175
) -> np.ndarray:
    """``text`` spoken by espeak-ng, float32 mono at ``rate``."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError(MISSING)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "speech.wav"
        subprocess.run(
            [exe, "-v", voice, "-s", str(words_per_minute), "-w", str(path), text],
            check=True,
            capture_output=True,
        )
        audio, source_rate = read_wav(path)
    return resample(audio, source_rate, rate)
