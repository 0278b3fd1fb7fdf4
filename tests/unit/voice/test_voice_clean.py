"""Text cleaning before TTS."""

from __future__ import annotations

import pytest

from omnivox.voice.tts.clean import clean_for_speech


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
