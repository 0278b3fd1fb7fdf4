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
_BOLD_ITALIC = re.compile(r"(\*\*\*|___)(?!\s)(.+?)(?<!\s)\1", re.S)
_BOLD = re.compile(r"(\*\*|__)(.+?)\1", re.S)
_STAGE = re.compile(r"\*[^*\n]+\*")  # single-asterisk span: a stage direction...
_EMPHASIS = re.compile(r"(?<=\w )\*([^*\n]+)\*(?= \w)")  # ...unless a sentence runs through it
_TIMES = re.compile(r"(?<=\d)\s*\*\s*(?=\d)")
_ITALIC = re.compile(r"(?<!\w)_(?!\s)([^_\n]+?)(?<!\s)_(?!\w)")
_STRIKE = re.compile(r"~~(.+?)~~")
_LINE_MARKER = re.compile(r"^\s*(?:#{1,6}\s+|>+\s*|[-*+•]\s+|\d+[.)]\s+)", re.M)
_RULE = re.compile(r"^\s*([-*_=])(\s*\1){2,}\s*$", re.M)
# a Markdown table's delimiter row: only pipes, dashes, colons and spaces, with a pipe and a dash
_TABLE_DELIMITER = re.compile(r"(?=[^|]*\|)(?=[^-]*-)[\s|:-]+")
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
    """Remove ``*...*`` spans (bold ``**...**`` and bold italic ``***...***`` are kept)."""
    # protect bold (and first bold italic, whose outer two stars the bold pass would otherwise take,
    # leaving a *stage direction*) from the single-star rule
    text = _BOLD_ITALIC.sub(lambda m: f"\0{m.group(2)}\0", text)
    text = _BOLD.sub(lambda m: f"\0{m.group(2)}\0", text)
    text = _EMPHASIS.sub(r"\1", text)
    text = _STAGE.sub(" ", text)
    return text.replace("\0", "")


def _table_row(line: str) -> str:
    """``| a | b |`` -> ``a, b``: the cells of a table row, said as a list."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") else body
    cells = [cell.strip() for cell in body.split("|")]
    cells = [cell for cell in cells if cell]
    return " ".join(
        cell if i == len(cells) - 1 or _ENDS_WITH_PUNCT.search(cell) else cell + ","
        for i, cell in enumerate(cells)
    )


def _speak_tables(text: str) -> str:
    """Markdown tables as speech: delimiter rows (``|---|:--:|``) go, each other row's cells are said
    separated by commas, one row per line (so each becomes a sentence).

    A row is a line that starts or ends with a pipe, or any line with a pipe in a block of lines that
    has a delimiter row (tables may leave out the outer pipes).
    """
    lines = text.split("\n")
    delimiter = [_TABLE_DELIMITER.fullmatch(ln) is not None for ln in lines]
    out: list[str] = []
    start = 0
    while start < len(lines):  # blocks of consecutive lines that have a pipe
        if "|" not in lines[start]:
            out.append(lines[start])
            start += 1
            continue
        end = start
        while end < len(lines) and "|" in lines[end]:
            end += 1
        in_table = any(delimiter[start:end])
        for line, is_delimiter in zip(lines[start:end], delimiter[start:end], strict=True):
            if is_delimiter:
                continue
            stripped = line.strip()
            is_row = in_table or stripped.startswith("|") or stripped.endswith("|")
            out.append(_table_row(line) if is_row else line)
        start = end
    return "\n".join(out)


def clean_for_speech(text: str) -> str:
    """Markdown, code, URLs, emoji and stage directions out; one line of speakable text back."""
    text = _CODE_BLOCK.sub(" ", text)
    text = _speak_tables(text)
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
