"""The streaming TTS contract: sentence chunking of a text stream, cleaning, voices, speed and stop."""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterator

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from omnivox.voice.tts.base import OUTPUT_RATE, SentenceChunker, StreamingTts, TtsChunk


def words_of(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text)


def chunk_all(text: str, **kw) -> list[str]:
    c = SentenceChunker(**kw)
    out = [s for w in words_of(text) for s in c.push(w)]
    return out + c.flush()


def test_sentences_come_out_as_soon_as_they_end() -> None:
    c = SentenceChunker(first_clause_words=0)
    assert c.push("Hello there. How") == ["Hello there."]
    assert c.push(" are you?") == []  # "?" at the very end: the next piece may continue it
    assert c.push(" Fine") == ["How are you?"]
    assert c.flush() == ["Fine"]


def test_first_chunk_may_end_at_a_clause_break() -> None:
    assert chunk_all("Well, the weather today, as it happens, is fine. Later, rain.") == [
        "Well, the weather today,",
        "as it happens, is fine.",
        "Later, rain.",
    ]


def test_abbreviations_stage_directions_and_long_runs() -> None:
    assert chunk_all("Dr. Smith is here. *waves. smiles.* Hi!", first_clause_words=0) == [
        "Dr. Smith is here.",
        "*waves. smiles.* Hi!",
    ]
    long = " ".join(["word"] * 50)
    parts = chunk_all(long, max_words=20)
    assert [len(p.split()) for p in parts] == [20, 20, 10]


def test_chunking_keeps_every_word() -> None:
    text = "One, two three four. Five six? Seven!\n\nEight nine, ten."
    assert " ".join(chunk_all(text)).split() == text.split()


def test_stop_while_waiting_for_text_ends_without_synthesising() -> None:
    stop = threading.Event()

    def text() -> Iterator[str]:
        yield "Hello there, "
        stop.set()
        yield "this is never spoken."

    said: list[str] = []

    class Recording(StreamingTts):
        def _synthesize(self, text, voice, stop, speed):
            said.append(text)
            yield np.zeros(10, np.float32)

    assert list(Recording().stream(text(), stop=stop)) == []
    assert said == []


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("Stop! Now", "Stop!"),
        ("Really?! Yes", "Really?!"),
        ("Well... maybe", "Well..."),
        ("Hmm… fine", "Hmm…"),
        ('He said "hi." Then', 'He said "hi."'),
        ("(See below.) Next", "(See below.)"),
        ("It’s ‘done.’ Next", "It’s ‘done.’"),
        ("[Quiet.] Next", "[Quiet.]"),
        ("One line\nNext", "One line"),
    ],
)
def test_sentence_ends(text: str, first: str) -> None:
    c = SentenceChunker(first_clause_words=0)
    assert c.push(text) == [first]
    assert c.flush() == [text[len(first) :].strip()]


@pytest.mark.parametrize("text", ["It is 3.5 degrees", "Go to example.com now", "Wait...", "Hello.World"])
def test_punctuation_without_whitespace_after_it_is_no_sentence_end(text: str) -> None:
    c = SentenceChunker(first_clause_words=0)
    assert c.push(text) == []
    assert c.flush() == [text]


@pytest.mark.parametrize(
    "abbr",
    ["Mr.", "Mrs.", "Ms.", "Dr.", "St.", "Prof.", "e.g.", "i.e.", "etc.", "vs.", "No.", "Jr.", "Sr.", "DR."],
)
def test_abbreviations_do_not_end_a_sentence(abbr: str) -> None:
    c = SentenceChunker(first_clause_words=0)
    assert c.push(f"See {abbr} Smith here. Bye") == [f"See {abbr} Smith here."]


def test_an_abbreviation_needs_its_own_word() -> None:
    # "Kidr." is not "dr.": only the whole last word is looked up
    assert SentenceChunker(first_clause_words=0).push("I saw Kidr. Then") == ["I saw Kidr."]


def test_blank_lines_make_no_empty_sentences_and_do_not_count_as_the_first() -> None:
    c = SentenceChunker()
    assert c.push("\n\n\n") == []
    assert c.push("One two three four, five") == ["One two three four,"]


@pytest.mark.parametrize("mark", [",", ";", ":", " —"])
def test_every_clause_mark_can_end_the_first_chunk(mark: str) -> None:
    c = SentenceChunker(first_clause_words=4)
    assert c.push(f"one two three four{mark} five") == [f"one two three four{mark}"]


def test_the_clause_cut_needs_enough_words_and_only_applies_to_the_first_chunk() -> None:
    c = SentenceChunker(first_clause_words=4)
    assert c.push("one two three, four") == []  # three words before the comma: too short
    assert c.push(" five, six") == ["one two three, four five,"]
    assert c.push(" seven eight nine ten, eleven") == []  # not the first chunk any more
    assert c.push(". ") == ["six seven eight nine ten, eleven."]
    c.flush()  # a new stream: its first chunk may be cut early again
    assert c.push("a b c d, e") == ["a b c d,"]


def test_first_clause_words_zero_disables_the_early_cut() -> None:
    c = SentenceChunker(first_clause_words=0)
    assert c.push("one two three four five, six seven") == []


def test_clause_breaks_inside_a_stage_direction_do_not_cut() -> None:
    c = SentenceChunker(first_clause_words=2)
    assert c.push("*leans in, smiling, slowly* Hello") == []
    assert c.push(", you. ") == ["*leans in, smiling, slowly* Hello, you."]


def test_a_code_block_stays_whole() -> None:
    c = SentenceChunker(first_clause_words=0)
    assert c.push("Here:\n```\na = 1. b = 2\nprint(a)\n```\nAfter. ") == [
        "Here:",
        "```\na = 1. b = 2\nprint(a)\n```",
        "After.",
    ]


def test_bold_does_not_count_as_a_stage_direction() -> None:
    c = SentenceChunker(first_clause_words=0)
    assert c.push("It is **very** hot. And") == ["It is **very** hot."]


def test_a_long_run_inside_markup_is_not_cut() -> None:
    c = SentenceChunker(first_clause_words=0, max_words=3)
    assert c.push("*a b c d e f* g ") == ["*a b c d e f*"]
    assert c.flush() == ["g"]


def test_a_long_run_without_spaces_to_cut_at_waits_for_the_flush() -> None:
    c = SentenceChunker(first_clause_words=0, max_words=3)
    assert c.push("a\tb\tc\td\te ") == []
    assert c.flush() == ["a\tb\tc\td\te"]


def test_no_sentence_exceeds_max_words_however_the_text_arrives() -> None:
    c = SentenceChunker(first_clause_words=0, max_words=20)
    parts = c.push(" ".join(["word"] * 50)) + c.flush()
    assert max(len(p.split()) for p in parts) <= 20
    assert [len(p.split()) for p in parts] == [20, 20, 10]  # as when it arrives word by word


def test_a_long_run_is_cut_around_markup_in_it() -> None:
    c = SentenceChunker(first_clause_words=0, max_words=3)
    assert c.push("x y *a b c d e* f g h i") == ["x y", "*a b c d e*", "f g h"]
    assert c.flush() == ["i"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "bb", "a,", "c;", "d.", "e?"]), max_size=60),
    st.lists(st.integers(0, 300), max_size=10),
    st.integers(0, 4),
    st.integers(1, 8),
)
def test_no_piece_of_a_long_run_exceeds_max_words(
    words: list[str], cuts: list[int], first: int, max_words: int
) -> None:
    text = " ".join(words)
    c = SentenceChunker(first_clause_words=first, max_words=max_words)
    out = [s for piece in split_at(text, cuts) for s in c.push(piece)] + c.flush()
    assert " ".join(out).split() == text.split()
    assert all(len(s.split()) <= max_words for s in out)


def test_flush_empties_the_chunker() -> None:
    c = SentenceChunker()
    c.push("half a sentence")
    assert c.flush() == ["half a sentence"]
    assert c.flush() == [] and c.push(" ") == [] and c.flush() == []


TEXT = st.text(alphabet=st.sampled_from(list("ab .,!?\n*`'\"")), max_size=80)


def split_at(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted(c for c in cuts if c < len(text)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(TEXT, st.lists(st.integers(0, 80), max_size=10), st.integers(0, 4), st.integers(1, 6))
def test_chunks_keep_every_word_in_order(text: str, cuts: list[int], first: int, max_words: int) -> None:
    c = SentenceChunker(first_clause_words=first, max_words=max_words)
    out = [s for piece in split_at(text, cuts) for s in c.push(piece)] + c.flush()
    assert " ".join(out).split() == text.split()
    assert all(s and s == s.strip() for s in out)


@settings(max_examples=300, deadline=None)
@given(TEXT, st.lists(st.integers(0, 80), max_size=10))
def test_sentence_ends_do_not_depend_on_how_the_text_is_split(text: str, cuts: list[int]) -> None:
    # without the first-clause rule (which is about timing) and the max_words rule, the sentences
    # are a function of the text alone
    def run(pieces: list[str]) -> list[str]:
        c = SentenceChunker(first_clause_words=0, max_words=1000)
        return [s for p in pieces for s in c.push(p)] + c.flush()

    assert run(split_at(text, cuts)) == run([text])


@settings(max_examples=300, deadline=None)
@given(TEXT, st.lists(st.integers(0, 80), max_size=10), st.integers(1, 6))
def test_long_run_cuts_do_not_depend_on_how_the_text_is_split(
    text: str, cuts: list[int], max_words: int
) -> None:
    def run(pieces: list[str]) -> list[str]:
        c = SentenceChunker(first_clause_words=0, max_words=max_words)
        return [s for p in pieces for s in c.push(p)] + c.flush()

    assert run(split_at(text, cuts)) == run([text])


class _Fake(StreamingTts):
    """Records what it is asked to say; each request yields ``pieces`` (float64, as a model might)."""

    default_voice = "amy"

    def __init__(self, pieces: list[np.ndarray] | None = None, speed: float = 1.0) -> None:
        self.calls: list[tuple[str, str, float]] = []
        self.pieces = [np.ones(240), np.ones(240)] if pieces is None else pieces
        self.speed = speed
        self.closed = 0

    @property
    def voices(self) -> tuple[str, ...]:
        return ("amy", "bob")

    def _synthesize(self, text: str, voice: str, stop: threading.Event, speed: float) -> Iterator[np.ndarray]:
        self.calls.append((text, voice, speed))
        try:
            for p in self.pieces:
                if stop.is_set():
                    return
                yield p
        finally:
            self.closed += 1


def test_defaults_of_the_contract() -> None:
    class Minimal(StreamingTts):
        def _synthesize(self, text, voice, stop, speed):
            yield np.zeros(1)

    tts = Minimal()
    assert tts.sample_rate == OUTPUT_RATE == 24000 and tts.speed == 1.0
    assert tts.voices == ("default",)
    assert tts.resolve_voice(None) == tts.resolve_voice("alloy") == "default"


def test_voices_resolve_to_the_default_unless_offered() -> None:
    tts = _Fake()
    assert tts.resolve_voice("bob") == "bob"
    assert tts.resolve_voice("alloy") == tts.resolve_voice(None) == "amy"
    list(tts.synthesize("Hi there.", voice="bob"))
    list(tts.synthesize("Hi there.", voice="nova"))
    assert [c[1] for c in tts.calls] == ["bob", "amy"]


def test_synthesize_yields_float32_chunks_with_the_cleaned_text() -> None:
    tts = _Fake()
    chunks = list(tts.synthesize("**Hello** there. See https://x.org now!"))
    assert [c.text for c in chunks] == ["Hello there.", "Hello there.", "See now!", "See now!"]
    assert all(isinstance(c, TtsChunk) and c.audio.dtype == np.float32 for c in chunks)
    assert [c[0] for c in tts.calls] == ["Hello there.", "See now!"]


def test_text_with_nothing_to_say_is_not_synthesised() -> None:
    tts = _Fake()
    for text in ("", "   ", "...", "*shrugs*", "```\ncode\n```", "😀 🎉", "---"):
        assert list(tts.speak(text)) == []
    assert tts.calls == []


def test_empty_audio_pieces_are_skipped() -> None:
    tts = _Fake(pieces=[np.zeros(0), np.ones(10), np.zeros(0)])
    chunks = list(tts.speak("Hello."))
    assert [len(c.audio) for c in chunks] == [10]


def test_speed_is_the_backend_setting_unless_given() -> None:
    tts = _Fake(speed=1.25)
    list(tts.speak("One."))
    list(tts.speak("Two.", speed=0.8))
    list(tts.stream(["Three."]))
    assert [c[2] for c in tts.calls] == [1.25, 0.8, 1.25]


def test_stream_uses_the_chunker_it_is_given() -> None:
    tts = _Fake(pieces=[np.ones(1)])
    chunks = list(tts.stream(words_of("One two three four, five. Six."), chunker=SentenceChunker(0)))
    assert [c.text for c in chunks] == ["One two three four, five.", "Six."]
    chunks = list(tts.stream(words_of("One two three four, five. Six.")))  # the default cuts early
    assert [c.text for c in chunks] == ["One two three four", "five.", "Six."]  # "," cleaned off


def test_stop_set_by_the_listener_ends_the_phrase_and_the_stream() -> None:
    tts = _Fake(pieces=[np.ones(5)] * 4)
    stop = threading.Event()
    got = []
    for chunk in tts.stream(words_of("First one. Second one."), stop=stop):
        got.append(chunk)
        stop.set()  # barge-in while the first phrase is still being synthesised
    assert len(got) == 1
    assert len(tts.calls) == 1 and tts.closed == 1  # the backend's generator was closed


def test_stop_set_before_the_stream_starts_says_nothing() -> None:
    tts = _Fake()
    stop = threading.Event()
    stop.set()
    assert list(tts.stream(["Hello there. ", "More."], stop=stop)) == []
    assert list(tts.speak("Hello.", stop=stop)) == []


def test_stop_set_while_the_last_text_arrives_synthesises_nothing() -> None:
    tts = _Fake()
    stop = threading.Event()

    def text() -> Iterator[str]:
        yield "Hello there"
        stop.set()  # barge-in before the reply's text was complete

    assert list(tts.stream(text(), stop=stop)) == []
    assert tts.calls == []  # a remote backend would have been sent a request for nothing


def test_speak_with_stop_set_never_starts_the_backend() -> None:
    tts = _Fake()
    stop = threading.Event()
    stop.set()
    assert list(tts.speak("Hello.", stop=stop)) == [] and list(tts.synthesize("One. Two.", stop=stop)) == []
    assert tts.calls == []


def test_stop_between_sentences_of_one_piece_speaks_no_more() -> None:
    tts = _Fake(pieces=[np.ones(5)])
    stop = threading.Event()
    got = []
    for chunk in tts.synthesize("First one. Second one. Third one.", stop=stop):
        got.append(chunk.text)
        stop.set()
    assert got == ["First one."] and [c[0] for c in tts.calls] == ["First one."]


def test_a_backend_that_ignores_stop_is_closed_when_stop_ends_the_phrase() -> None:
    closed = []

    class Deaf(StreamingTts):
        def _synthesize(self, text, voice, stop, speed):
            try:
                while True:  # never looks at stop
                    yield np.ones(5)
            finally:
                closed.append(text)

    stop = threading.Event()
    speech = Deaf().speak("Hello.", stop=stop)
    next(speech)
    stop.set()
    assert list(speech) == [] and closed == ["Hello."]


def test_chunks_are_immutable() -> None:
    chunk = TtsChunk(np.zeros(1, np.float32), "x")
    with pytest.raises(AttributeError):
        chunk.text = "y"  # type: ignore[misc]


def test_first_max_words_cuts_a_long_first_sentence_after_that_many_whole_words() -> None:
    c = SentenceChunker(first_max_words=3)
    first, *rest = "The weather in Paris is sunny and mild. It rains later today.".split(" ")
    out = c.push(first)
    for word in rest:  # as an LLM writes: each word with the space before it
        out += c.push(" " + word)
    out += c.flush()
    # the third word is known whole once the space after it arrives; later sentences are whole
    assert out == ["The weather in", "Paris is sunny and mild.", "It rains later today."]
    assert SentenceChunker(first_max_words=3).push("Hi there. How are") == ["Hi there."]
    assert SentenceChunker(first_max_words=3).push("One two three") == []  # "three" may go on


def test_words_pushed_whole_are_cut_after_without_waiting_for_the_next_word() -> None:
    c = SentenceChunker(first_max_words=3, then_max_words=8)
    out = [c.push(w, whole=True) for w in ["The", " weather", " in", " Paris", " is", " mild.", " It"]]
    # the first piece goes with its third word, a sentence with its last (not with the word after)
    assert out == [[], [], ["The weather in"], [], [], ["Paris is mild."], []]
    assert c.flush() == ["It"]
    # pushed without ``whole`` the same words wait for the space after them, as before
    plain = SentenceChunker(first_max_words=3)
    assert [plain.push(w) for w in ["The", " weather", " in", " Paris"]] == [[], [], [], ["The weather in"]]
    # a word known whole at a clause or a sentence's end cuts there too, markup kept whole
    assert SentenceChunker().push("Well, yes.", whole=True) == ["Well, yes."]
    assert SentenceChunker(first_max_words=2).push("*smiles. warmly", whole=True) == []  # still open


def test_then_max_words_cuts_the_second_piece_short_too_at_a_clause_or_after_that_many_words() -> None:
    def pieces(text: str) -> list[str]:
        c = SentenceChunker(first_clause_words=3, first_max_words=3, then_max_words=4)
        first, *rest = text.split(" ")
        out = c.push(first)
        for word in rest:
            out += c.push(" " + word)
        return out + c.flush()

    long = "The weather in Paris is sunny and mild all day. It rains later today and tomorrow again."
    assert pieces(long) == ["The weather in", "Paris is sunny and", "mild all day.", long.split(". ")[1]]
    assert pieces("Well I think that, if you ask me, it is fine.") == [
        "Well I think",
        "that, if you ask",  # (its clause break came after one word: too soon to cut)
        "me, it is fine.",
    ]
    assert pieces("Sure. Well I think, my friend, you are right.") == [
        "Sure.",  # a whole first sentence is the first piece
        "Well I think,",  # (a clause break before the 4 words with first_clause_words=3)
        "my friend, you are right.",
    ]
