"""PocketSphinx streaming ASR with the US English model shipped in the pocketsphinx wheel.

The decoder (acoustic model, 130k-word dictionary, trigram LM: about a third of a second to load)
is built once per instance and reused for every utterance and session. Between sessions ``reset``
puts back the initial cepstral mean normalisation, the only state PocketSphinx carries across
utterances, so a new session decodes exactly as a freshly loaded decoder would.
"""

from __future__ import annotations

import re

import numpy as np
from pocketsphinx import Decoder

from omnivox.audio.pcm import to_pcm16
from omnivox.voice.asr.base import Hypothesis, StreamingAsr

# alternate pronunciations come back as "the(2)"
_ALT = re.compile(r"\(\d+\)$")


def _is_filler(word: str) -> bool:
    # <s>, </s>, <sil>, [NOISE], ++BREATH++ and the like mark silence and noise, not words
    return word.startswith(("<", "[", "+"))


class PocketsphinxAsr(StreamingAsr):
    """Streaming recogniser; partials from the running hypothesis, word times from the segmentation.

    ``config`` passes extra PocketSphinx options (``lm=``, ``dict=``, ``hmm=``...) to the decoder.
    """

    loads = 0  # decoders built in this process; reuse means this does not grow per session

    def __init__(self, sample_rate: int = 16000, **config: object) -> None:
        super().__init__()
        self.sample_rate = sample_rate
        # PocketSphinx's own search settings: narrower beams (fewer active HMMs per frame, no second
        # flat-lexicon pass) save 15-25% CPU but lose words, most on narrowband telephone audio
        self._decoder = Decoder(samprate=sample_rate, loglevel="FATAL", **config)
        PocketsphinxAsr.loads += 1
        self._initial_cmn = self._decoder.get_cmn(False)
        self._frame_ms = 1000.0 / float(self._decoder.config["frate"])

    def _begin(self) -> None:
        self._decoder.start_utt()
        self._cached: tuple[str, Hypothesis | None] = ("", None)

    def _process(self, audio: np.ndarray) -> Hypothesis | None:
        if len(audio):  # the decoder rejects an empty buffer; a resampler can hand one over
            self._decoder.process_raw(to_pcm16(audio), False, False)
        return self._hypothesis()

    def _end(self) -> Hypothesis:
        self._decoder.end_utt()
        return self._hypothesis() or ("", ())

    def _reset_session(self) -> None:
        self._decoder.set_cmn(self._initial_cmn)

    def _hypothesis(self) -> Hypothesis | None:
        hyp = self._decoder.hyp()
        if hyp is None:
            return None
        if hyp.hypstr == self._cached[0]:
            # the segmentation walks the whole lattice: skip it while the words stay the same
            return self._cached[1]
        words = [
            (_ALT.sub("", s.word), s.start_frame * self._frame_ms, (s.end_frame + 1) * self._frame_ms)
            for s in self._decoder.seg()
            if not _is_filler(s.word)
        ]
        result = (" ".join(w for w, _, _ in words), words)
        self._cached = (hyp.hypstr, result)
        return result
