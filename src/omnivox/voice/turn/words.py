"""Whether a transcript reads as a finished sentence: the words' half of an end-of-turn judgement.

smart-turn hears how speech ends (intonation, the cut); on a flat voice it cannot. espeak-ng says
"What is the weather like in Paris today?" with no final fall and smart-turn gives it 0.02, while it
gives "I need a table for" 0.83 (docs/benchmarks.md, "End of turn on flat and telephone voices").
The recogniser's words tell these apart where the sound does not: a turn whose words stop on "for",
"to", "with", "could", "the" or "um", or that Whisper writes trailing off ("..."), is not finished
whatever its tune; one that ends on a content word after a few words reads as finished.

``words_complete`` says so, or ``None`` when the words cannot tell (no words, or too few: "Well,
well." and "Thank you." are whole or a start alike); ``SemanticTurnPolicy`` weighs it against the
model's probability.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9']+")

MIN_WORDS = 3  # fewer words than this and the words do not judge (the model alone does)

# Words a finished English sentence seldom ends on: articles and determiners, prepositions that are
# seldom stranded, conjunctions, subject pronouns, auxiliaries and modals, fillers. Left out on
# purpose: particles that end phrasal verbs ("hold on", "come in", "log off", "it's over"), "so" ("I
# think so"), "before", "about", "like". Known misses: a stranded "What is it for?" and an
# elliptical "Yes, I can." read as unfinished, and wait the eagerness's longest pause.
UNFINISHED_TAILS = frozenset(
    """
    a an the this these those my your his her its our their every each
    of to for with at from into onto than between without toward towards upon via per
    and or but nor because if while although though unless whether
    i we he she they it's i'm we're you're they're i'd i'll we'll
    is are was were am be been being could would should shall must might can will may
    um uh er erm uhm
    """.split()
)


def words(text: str) -> list[str]:
    """Lower-case words, hyphens and punctuation taken as spaces ("Mm-hmm." -> ["mm", "hmm"])."""
    return _WORD.findall(text.lower().replace("-", " "))


def trails_off(text: str) -> bool:
    """Whisper's way of writing speech that stops mid-thought: "... know is...", "to-"."""
    t = text.rstrip()
    return t.endswith(("...", "\u2026", "-", ","))


def words_complete(text: str) -> bool | None:
    """Whether ``text`` reads as a finished turn: False when it trails off or stops on a word no
    sentence ends on, True when it ends on another word after at least ``MIN_WORDS`` words, None
    when the words cannot tell."""
    heard = words(text)
    if not heard:
        return None
    if trails_off(text) or heard[-1] in UNFINISHED_TAILS:
        return False
    if len(heard) < MIN_WORDS:
        return None
    return True
