"""Re-chunk a token stream into whole words before TTS.

LLM deltas split words anywhere ("Par" "is"); a TTS or a caption fed half words stutters. These
helpers hold text back until a word is complete (followed by whitespace) and emit one word at a
time with the whitespace that preceded it, so ``"".join(output) == "".join(input)`` always holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

_WORD = re.compile(r"\s*\S+(?=\s)")


class WordChunker:
    """``push`` deltas, get the words they completed; ``flush`` the rest at the end."""

    def __init__(self) -> None:
        self._buf = ""

    def push(self, delta: str) -> list[str]:
        self._buf += delta
        words = []
        pos = 0
        while m := _WORD.match(self._buf, pos):
            words.append(m.group())
            pos = m.end()
        self._buf = self._buf[pos:]
        return words

    def flush(self) -> list[str]:
        rest, self._buf = self._buf, ""
        return [rest] if rest else []


def rechunk_to_words(deltas: Iterable[str]) -> Iterator[str]:
    """Whole words (each with its leading whitespace) from arbitrary text deltas."""
    chunker = WordChunker()
    for delta in deltas:
        yield from chunker.push(delta)
    yield from chunker.flush()
