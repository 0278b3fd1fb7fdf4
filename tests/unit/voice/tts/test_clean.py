"""Text cleaning before TTS."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from omnivox.voice.tts.clean import clean_for_speech, strip_stage_directions


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("**Sure!** Here it is.", "Sure! Here it is."),
        ("*laughs* That is funny. *pauses* Anyway...", "That is funny. Anyway..."),
        ("I *really* mean it.", "I really mean it."),
        ("So _very_ good, said snake_case_name.", "So very good, said snake_case_name."),
        ("# Plan\n1. Buy milk\n2. Call mom\n- Rest", "Plan. Buy milk. Call mom. Rest"),
        ("See [the docs](https://example.com) or https://x.org/a?b=1 now.", "See the docs or now."),
        ("Run `ls` like this:\n```bash\nls -la\n```\nDone.", "Run ls like this: Done."),
        ("Hello 👋🏽 world 🇫🇷! ✨", "Hello world!"),
        ("5 * 3 = 15", "5 times 3 = 15"),
        ("<b>bold</b> and ~~struck~~ > quoted", "bold and struck quoted"),
        ("Temperature: 20°C — nice… right?", "Temperature: 20°C — nice… right?"),
        ("*waves*", ""),
    ],
)
def test_clean_for_speech(text: str, spoken: str) -> None:
    assert clean_for_speech(text) == spoken


def test_plain_text_is_unchanged() -> None:
    text = "What is the weather like in Paris today? It's 20 degrees, isn't it."
    assert clean_for_speech(text) == text


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("![a cat](cat.png) Look.", "Look."),  # images go, alt text too
        ("[click here](http://x.org)", "click here"),
        ("Visit www.example.com today.", "Visit today."),
        ("Open http://a.b/c?d=e#f, then wait.", "Open then wait."),  # the URL takes its comma along
        ("Here:\n```py\nx = 1", "Here"),  # an unclosed code block runs to the end
        ("Before ``` never closed", "Before"),
        ("---\nAbove\n***\nBelow\n===", "Above. Below"),  # horizontal rules
        ("> quoted line\n>> nested", "quoted line. nested"),
        ("• one\n+ two\n* three\n3) four", "one. two. three. four"),
        ("## Heading ##\nText", "Heading. Text"),
        ("#hashtag rocks", "hashtag rocks"),
        ("| a | b |\n| 1 | 2 |", "a, b. 1, 2"),  # table rows: cells said as a list, one row a sentence
        ("2 * 3 * 4 = 24", "2 times 3 times 4 = 24"),
        ("5*3", "5 times 3"),
        ("Hello , world ;  ok .", "Hello, world; ok."),
        ("Wait,, what;: no", "Wait, what; no"),
        (", leading and trailing ;", "leading and trailing"),
        ("Title:\nBody", "Title: Body"),  # a line that ends in punctuation gets no period
        ("Line one\nLine two\n", "Line one. Line two"),
        ("x_1 and x_2 stay", "x_1 and x_2 stay"),
        ("Say *hi* to you", "Say hi to you"),
        ("*Really* good.", "good."),  # not between two words: a stage direction
        ("He *sighs*, then speaks.", "He, then speaks."),
        ("**bold *inner* text**", "bold inner text"),
        ("1\ufe0f\u20e3 first", "1 first"),  # keycap
        ("👨\u200d👩\u200d👧 family ⌛ ⭐", "family"),  # joined emoji, hourglass, star
        ("<br/>line<br>two", "line two"),
        ("`inline` and ``", "inline and"),
        ("x^2 and ~approx", "x 2 and approx"),
        ("", ""),
        ("   \n\n ", ""),
    ],
)
def test_more_markup(text: str, spoken: str) -> None:
    assert clean_for_speech(text) == spoken


def test_bold_italic_keeps_its_words() -> None:
    assert clean_for_speech("This is ***very*** important.") == "This is very important."


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("***Warning:*** hot.", "Warning: hot."),  # not between two words, still not a direction
        ("___very___ nice", "very nice"),
        ("***a*** and ***b***", "a and b"),
        ("***\nAbove\n***", "Above"),  # a rule of stars is no bold italic span
    ],
)
def test_bold_italic_variants(text: str, spoken: str) -> None:
    assert clean_for_speech(text) == spoken


def test_a_table_delimiter_row_is_not_spoken() -> None:
    # the cells are said separated by commas, so the voice pauses between them (the test first pinned
    # "a b. 1 2", cells run together; the separator rule asked for the comma form)
    assert clean_for_speech("| a | b |\n|---|:---:|\n| 1 | 2 |") == "a, b. 1, 2"


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("| **City** | Temp |\n| --- | ---: |\n| New York | 20°C |", "City, Temp. New York, 20°C"),
        ("Name | Age\n--|--\nAlice | 30", "Name, Age. Alice, 30"),  # no outer pipes
        ("|---|:---:|", ""),  # a delimiter row alone (the chunker cuts at newlines)
        ("| a | b |", "a, b"),  # a row alone
        ("| Paris | |\n|-|-|\n| | 3 |", "Paris. 3"),  # empty cells are not said
        ("| Yes. | No |", "Yes. No"),  # a cell that ends in punctuation gets no comma
        ("Results:\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\nDone.", "Results: x, y. 1, 2. Done."),
        ("a | b in prose", "a b in prose"),  # a pipe outside a table is only dropped
    ],
)
def test_tables(text: str, spoken: str) -> None:
    assert clean_for_speech(text) == spoken


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("**keep** *drop* me", "keep me"),  # bold loses its markers, keeps its words
        ("I *really* do", "I really do"),
        ("*waves* hi *nods*", "hi"),
        ("__also bold__ *x*", "also bold"),
        ("no stars", "no stars"),
    ],
)
def test_strip_stage_directions(text: str, kept: str) -> None:
    assert strip_stage_directions(text).split() == kept.split()
    assert "*drop*" not in strip_stage_directions(text)


MARKDOWN = st.text(alphabet=st.sampled_from(list("ab1 .,;:!?\n*_`#>-~|[]()<😀\u200d/")), max_size=60)


@settings(max_examples=500, deadline=None)
@given(MARKDOWN)
def test_the_result_is_always_one_trimmed_line(text: str) -> None:
    spoken = clean_for_speech(text)
    assert "\n" not in spoken and "  " not in spoken and spoken == spoken.strip()
    assert not spoken.startswith((",", ";", ":")) and not spoken.endswith((",", ";", ":"))


SENTENCE = st.lists(st.from_regex(r"[A-Za-z]{1,8}", fullmatch=True), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(SENTENCE, st.sampled_from([".", "!", "?", ","])), min_size=1, max_size=4))
def test_plain_prose_passes_unchanged(sentences) -> None:
    text = " ".join(" ".join(words) + end for words, end in sentences)
    text = text[:-1] + "."  # a sentence, not a trailing comma (which would be trimmed)
    assert clean_for_speech(text) == text
