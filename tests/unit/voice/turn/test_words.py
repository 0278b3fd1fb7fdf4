"""Whether a transcript reads as a finished turn (the words' half of semantic_vad)."""

from __future__ import annotations

import pytest

from omnivox.voice.turn.words import trails_off, words, words_complete


@pytest.mark.parametrize(
    "text",
    [
        "What is the weather like in Paris today?",  # espeak-ng's: smart-turn gave it 0.02
        "Please remind me to call my sister tomorrow.",
        "turn on the light in the kitchen",  # no punctuation at all
        "My phone number is 5 5 5 1 2 3 4",
        "Thank you, that's all.",
        "Can you hold on",  # a particle ends a phrasal verb
    ],
)
def test_a_sentence_ending_on_a_content_word_reads_finished(text):
    assert words_complete(text) is True


@pytest.mark.parametrize(
    "text",
    [
        "Can you remind me to?",  # Whisper's question mark does not finish it
        "I would like to order a pizza with.",
        "So I was thinking that maybe we could.",
        "I need a table for",
        "What I really want to know is...",
        "I would like to order a piece with...",
        "Well-am.",  # "Well, um," misheard: "am" is an auxiliary
        "um",
        "I want the",
    ],
)
def test_a_fragment_reads_unfinished(text):
    assert words_complete(text) is False


@pytest.mark.parametrize("text", ["", "...", "Well, well.", "Thank you.", "Yes"])
def test_too_few_words_or_none_cannot_tell(text):
    assert words_complete(text) is None


def test_trailing_off_is_an_ellipsis_a_dash_or_a_comma():
    assert trails_off("and then...") and trails_off("to-") and trails_off("Well,") and trails_off("so\u2026")
    assert not trails_off("Done.") and not trails_off("Really?")


def test_words_split_hyphens_and_drop_punctuation():
    assert words("Mm-hmm. Don't stop at 10!") == ["mm", "hmm", "don't", "stop", "at", "10"]
