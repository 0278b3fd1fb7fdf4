"""hibari-tts: a small neural English TTS (ONNX, 24 kHz, many times real time on one core), no torch.

Only the voice shipped inside the wheel ("heart", American English) is always there; hibari's
other voices are separate downloads, which omnivox never triggers: they are offered only when a user
has already put them into hibari's cache (``HIBARI_HOME``). Each voice is a whole model, loaded on
first use and kept; the G2P (lexicons and tagger) is shared between voices of the same accent.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
from hibari import Hibari
from hibari.voices import DEFAULT, VOICES, voice_path

from omnivox.voice.tts.base import StreamingTts


def available_voices() -> tuple[str, ...]:
    """Voices usable without a download: the bundled one plus any already in hibari's cache."""
    names = []
    for name in VOICES:
        try:
            voice_path(name, download_missing=False)
        except (FileNotFoundError, ValueError):
            continue
        names.append(name)
    return tuple(names)


class HibariTts(StreamingTts):
    """Sentence-by-sentence synthesis with hibari.

    ``speed`` 1.0 is the voice's natural pace; ``seed`` fixes the noise component so the same text
    gives the same samples (None: fresh noise each call).
    """

    loads = 0  # ONNX models created in this process; reuse means this stays put across sessions

    def __init__(
        self, voice: str = DEFAULT, speed: float = 1.0, seed: int | None = None, threads: int = 1
    ) -> None:
        self.speed = speed
        self.seed = seed
        self.threads = threads
        self._voices = available_voices()
        if voice not in self._voices:
            raise ValueError(
                f"hibari voice {voice!r} is not available offline; have {', '.join(self._voices)}"
            )
        self.default_voice = voice
        self._models: dict[str, Hibari] = {}
        self._lock = threading.Lock()  # two sessions asking for a new voice at once load it once
        self.model(voice)

    @property
    def voices(self) -> tuple[str, ...]:
        return self._voices

    def model(self, voice: str) -> Hibari:
        """The loaded model for ``voice`` (loading it on first use)."""
        with self._lock:
            m = self._models.get(voice)
            if m is None:
                british = VOICES[voice]["british"]
                g2p = next(
                    (x._g2p for x in self._models.values() if VOICES[x.voice]["british"] == british), None
                )
                m = Hibari(voice=voice, threads=self.threads, g2p=g2p)
                m.phonemize("Warm up.")  # hibari loads its lexicons lazily: pay that here, not mid-reply
                HibariTts.loads += 1
                self._models[voice] = m
            return m

    def _synthesize(self, text: str, voice: str, stop: threading.Event, speed: float) -> Iterator[np.ndarray]:
        m = self.model(voice)
        rng = np.random.default_rng(self.seed)
        # hibari splits long sentences at clauses; each part is synthesised and yielded on its own
        for phonemes in m.phonemize(text):
            if stop.is_set():
                return
            yield m.from_ids(m.ids(phonemes), speed, rng)
