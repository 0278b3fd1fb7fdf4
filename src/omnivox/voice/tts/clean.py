"""Text cleaning before speech: what a chat model writes for a screen is not what should be said.

Markdown markup goes (its words stay), code blocks and URLs go (nobody wants them read out), emoji
go, and stage directions in single asterisks (``*laughs*``, ``*clears throat*``) go entirely: voice
models are told to speak, but chat-tuned ones still act. A single-asterisk span inside a sentence,
between two words (``I *really* mean it``), is emphasis and keeps its words, as do bold (``**x**``)
and underscore italics (``_x_``). The result is plain text on one line.
"""

from __future__ import annotations

import re

_CODE_BLOCK = re.compile(r"```.*?(```|$)", re.S)
_INLINE_CODE = re.compile(r"`([^`]*)`")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+|www\.\S+")
_HTML_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_BOLD = re.compile(r"(\*\*|__)(.+?)\1", re.S)
_STAGE = re.compile(r"\*[^*\n]+\*")  # single-asterisk span: a stage direction...
_EMPHASIS = re.compile(r"(?<=\w )\*([^*\n]+)\*(?= \w)")  # ...unless a sentence runs through it
_TIMES = re.compile(r"(?<=\d)\s*\*\s*(?=\d)")
_ITALIC = re.compile(r"(?<!\w)_(?!\s)([^_\n]+?)(?<!\s)_(?!\w)")
_STRIKE = re.compile(r"~~(.+?)~~")
_LINE_MARKER = re.compile(r"^\s*(?:#{1,6}\s+|>+\s*|[-*+•]\s+|\d+[.)]\s+)", re.M)
_RULE = re.compile(r"^\s*([-*_=])(\s*\1){2,}\s*$", re.M)
_EMOJI = re.compile(
    "["
    "\U0001f000-\U0001faff"  # pictographs, emoticons, transport, flags, supplemental symbols
    "\u2600-\u27bf"  # misc symbols and dingbats
    "\u2b00-\u2bff"  # arrows and stars
    "\u2300-\u23ff"  # technical (watch, hourglass)
    "\ufe0e\ufe0f\u200d\u20e3"  # variation selectors, zero-width joiner, keycap
    "]+"
)
_LEFTOVER = re.compile(r"[*#`~|<>^]+|(?<!\w)_+|_+(?!\w)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])")
_REPEATED_PUNCT = re.compile(r"([,;:])(?:\s*[,;:])+")
_ENDS_WITH_PUNCT = re.compile(r"[.!?,;:…]$")


def strip_stage_directions(text: str) -> str:
    """Remove ``*...*`` spans (bold ``**...**`` is kept)."""
    text = _BOLD.sub(lambda m: f"\0{m.group(2)}\0", text)  # protect bold from the single-star rule
    text = _EMPHASIS.sub(r"\1", text)
    text = _STAGE.sub(" ", text)
    return text.replace("\0", "")


def clean_for_speech(text: str) -> str:
    """Markdown, code, URLs, emoji and stage directions out; one line of speakable text back."""
    text = _CODE_BLOCK.sub(" ", text)
    text = _INLINE_CODE.sub(r"\1", text)
    text = _IMAGE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub(" ", text)
    text = _HTML_TAG.sub(" ", text)
    text = _TIMES.sub(" times ", text)
    text = _RULE.sub("", text)
    text = _LINE_MARKER.sub("", text)
    text = strip_stage_directions(text)
    text = _ITALIC.sub(r"\1", text)
    text = _STRIKE.sub(r"\1", text)
    text = _EMOJI.sub(" ", text)
    text = _LEFTOVER.sub(" ", text)
    # lines (list items, headings) become sentences so the voice pauses between them
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    last = len(lines) - 1
    text = " ".join(
        ln if _ENDS_WITH_PUNCT.search(ln) or i == last else ln + "." for i, ln in enumerate(lines)
    )
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(text.split()))
    text = _REPEATED_PUNCT.sub(r"\1", text)
    return text.strip(" ,;:")
