"""The backchannel witness: how near a short utterance's sound comes to a backchannel's.

Whisper tiny.en turns a short backchannel into confident wrong words, above all over a telephone
line ("Bye" and "I think..." for hibari's "i see", "Brighter." for "right", "But, hold it." for "mm
hmm": log-probabilities -0.37 to -0.85, as sure as of a real "Hold on."). Its free transcript's
scores cannot tell them from a barge-in (docs/benchmarks.md, "Conversation quality, round four").
The witness asks the recogniser a second question about the same sound: each backchannel, forced
onto the clip as its transcript (teacher-forced, one encoding, ``StreamingAsr.score_texts``),
against the words it wrote, forced the same way. A misheard backchannel scores near its free
transcript; a real "wait" or "what about tomorrow?" scores far below it (the margins:
docs/benchmarks.md, "The backchannel witness"). It costs one encoder pass and a short decoder pass
per phrase, so the listener asks it only of a short utterance of few words heard over a reply.
"""

from __future__ import annotations

import numpy as np

from omnivox.voice.asr.base import StreamingAsr, normalize_words

# backchannels as Whisper writes them. Each costs a decoder pass over the clip (about 10 ms of
# a core each, beside the encoder's 60-130 ms), so one spelling each; "All right." and "Oh." are
# left out: on a misheard barge-in's sound ("Our" for espeak-ng's "sorry" over G.711) they came
# above the words Whisper wrote
PHRASES = ("Mm-hmm.", "Mhm.", "Uh-huh.", "Yeah.", "Yes.", "Okay.", "Right.", "Sure.", "I see.")
MAX_WORDS = 4  # an utterance of more words is never taken for a backchannel (nor scored)
MAX_MS = 2500.0  # nor one whose clip (padding, speech and the pause heard so far) is longer


def backchannel_margin(asr: StreamingAsr, audio: np.ndarray, text: str) -> float | None:
    """The best backchannel's forced mean log-probability on ``audio`` less that of ``text`` (the
    words the recogniser wrote on it): near 0 or above, the sound is as much a backchannel as those
    words. None: nothing to weigh (no words, too many, too long a clip, or a recogniser that cannot
    score a given text)."""
    n_words = len(normalize_words(text))
    if not n_words or n_words > MAX_WORDS or len(audio) > MAX_MS * asr.sample_rate / 1000:
        return None
    scores = asr.score_texts(audio, [text, *PHRASES])
    if scores is None:
        return None
    return max(scores[1:]) - scores[0]
