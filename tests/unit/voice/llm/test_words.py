"""Token deltas re-chunked into whole words: nothing lost, nothing reordered, no half words."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from omnivox.voice.llm.words import WordChunker, rechunk_to_words


def test_split_words_are_joined_before_they_are_emitted() -> None:
    assert list(rechunk_to_words(["Par", "is is", " the", " capital ", "of", " Fra", "nce."])) == [
        "Paris",
        " is",
        " the",
        " capital",
        " of",
        " France.",
    ]


def test_a_word_waits_for_the_whitespace_after_it() -> None:
    c = WordChunker()
    assert c.push("Hello") == []
    assert c.push(" wor") == ["Hello"]
    assert c.push("ld") == []
    assert c.push("\n") == [" world"]
    assert c.flush() == ["\n"]  # trailing whitespace comes out at the end, on its own


def test_one_delta_can_complete_several_words() -> None:
    c = WordChunker()
    assert c.push("one two  three\tfour") == ["one", " two", "  three"]
    assert c.flush() == ["\tfour"]


def test_leading_whitespace_stays_with_the_next_word() -> None:
    assert list(rechunk_to_words(["  ", "\n", "hi", " there"])) == ["  \nhi", " there"]


@pytest.mark.parametrize("deltas", [[], [""], ["", "", ""]])
def test_nothing_in_nothing_out(deltas: list[str]) -> None:
    assert list(rechunk_to_words(deltas)) == []


def test_only_whitespace_comes_out_once_at_the_end() -> None:
    assert list(rechunk_to_words([" ", "\n", " "])) == [" \n "]


def test_flush_empties_the_chunker_for_the_next_stream() -> None:
    c = WordChunker()
    c.push("half")
    assert c.flush() == ["half"]
    assert c.flush() == [] and c.push("new ") == ["new"]


DELTAS = st.lists(st.text(alphabet=st.sampled_from(list("ab \n\t.,é")), max_size=8), max_size=12)


@settings(max_examples=300, deadline=None)
@given(DELTAS)
def test_the_output_joins_to_the_input(deltas: list[str]) -> None:
    words = list(rechunk_to_words(deltas))
    assert "".join(words) == "".join(deltas)
    assert all(words)  # no empty pieces


@settings(max_examples=300, deadline=None)
@given(DELTAS)
def test_every_piece_but_the_last_is_exactly_one_whole_word(deltas: list[str]) -> None:
    words = list(rechunk_to_words(deltas))
    text = "".join(deltas)
    for w in words[:-1]:
        assert len(w.split()) == 1 and not w[-1].isspace()
    # a word is only emitted once whitespace follows it, so each maps to a word of the whole text
    assert [w.strip() for w in words if w.strip()] == text.split()


@settings(max_examples=100, deadline=None)
@given(DELTAS, DELTAS)
def test_the_words_do_not_depend_on_the_delta_boundaries(a: list[str], b: list[str]) -> None:
    if "".join(a) == "".join(b):
        assert list(rechunk_to_words(a)) == list(rechunk_to_words(b))
    assert list(rechunk_to_words(a)) == list(rechunk_to_words(["".join(a)]))
