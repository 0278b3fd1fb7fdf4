"""The backchannel witness on real speech (hibari, espeak-ng), heard by Whisper tiny.en wideband and
over a G.711 telephone line: a misheard backchannel scores near its words, a real barge-in far."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.voice.asr.base import Hypothesis, StreamingAsr
from omnivox.voice.witness import MAX_WORDS, PHRASES, backchannel_margin

PAD = np.zeros(4800, np.float32)  # 0.3 s: the listener's prefix padding


@pytest.fixture(scope="module")
def heard():
    from omnivox.bench.interruptions import telephone
    from omnivox.bench.turns import synthetic_voices, trim
    from omnivox.voice.asr.whisper_asr import WhisperAsr

    asr, voices = WhisperAsr(), synthetic_voices()

    def hear(voice: str, said: str, line: str) -> tuple[str, float | None]:
        """What Whisper writes for ``said`` (padded as the listener hears it), and the margin."""
        clip = np.concatenate([PAD, trim(voices[voice](said)), PAD, PAD])
        if line == "g711":
            clip = telephone(clip)
        text = asr.transcribe(clip).text
        return text, backchannel_margin(asr, clip, text)

    return hear


# measured: docs/benchmarks.md, "The backchannel witness" (each clip alone, no echo); the judge's
# threshold (``InterruptionPolicy.witness_margin_min``) lies between the two lists
MISHEARD = [
    ("hibari", "mm hmm", "g711", "My name is..."),  # +0.54
    ("hibari", "uh huh", "g711", "Ahem."),  # +0.28
    ("hibari", "uh huh", "wide", "Ahem."),  # +0.25
]
BARGE_INS = [
    ("hibari", "wait", "g711", "Wait."),  # -2.35
    ("hibari", "hold on", "g711", "Hold on."),  # -2.10
    ("hibari", "sorry", "wide", "Sorry."),  # -2.53
    ("espeak", "actually", "g711", "actually"),  # -1.89
    ("espeak", "what about tomorrow", "g711", "What about tomorrow?"),  # -1.20
    ("espeak", "sorry", "g711", "Sorry"),  # -1.67
    ("espeak", "stop", "wide", "Stop."),  # -3.00
]


@pytest.mark.parametrize(("voice", "said", "line", "text"), MISHEARD)
def test_a_misheard_backchannel_scores_as_near_a_backchannel_as_its_words(
    heard, voice, said, line, text
) -> None:
    got, margin = heard(voice, said, line)
    assert got == text  # Whisper's wrong words: the judge's words alone would cut the reply
    assert margin is not None and margin > -0.2


@pytest.mark.parametrize(("voice", "said", "line", "text"), BARGE_INS)
def test_a_real_barge_in_scores_far_below_its_words_as_a_backchannel(heard, voice, said, line, text) -> None:
    got, margin = heard(voice, said, line)
    assert got == text
    assert margin is not None and margin < -1.0


def test_a_backchannel_heard_right_is_its_own_best_backchannel(heard) -> None:
    text, margin = heard("espeak", "mm hmm", "g711")
    assert text == "Mm-hmm." and margin == pytest.approx(0.0, abs=1e-6)  # "Mm-hmm." is a phrase
    text, margin = heard("hibari", "i see", "g711")
    assert text == "I see." and margin == pytest.approx(0.0, abs=1e-6)


class _Unscored(StreamingAsr):
    """A recogniser that cannot score a given text (PocketSphinx, a remote one)."""

    def _process(self, audio: np.ndarray) -> Hypothesis | None:
        return None

    def _end(self) -> Hypothesis:
        return ("", ())


def test_nothing_to_weigh_gives_no_margin(heard) -> None:
    from omnivox.voice.asr.whisper_asr import WhisperAsr

    clip = np.zeros(16000, np.float32)
    asr = WhisperAsr()
    assert backchannel_margin(asr, clip, "") is None  # no words
    assert backchannel_margin(asr, clip, " ".join(["stop"] * (MAX_WORDS + 1))) is None  # too many
    assert backchannel_margin(asr, np.zeros(16000 * 3, np.float32), "Hold on.") is None  # too long
    assert backchannel_margin(_Unscored(), clip, "Hold on.") is None  # a recogniser that cannot say
    assert len(asr.score_texts(clip, ["Hold on.", *PHRASES]) or []) == 1 + len(PHRASES)
    assert asr.scorings == 1
