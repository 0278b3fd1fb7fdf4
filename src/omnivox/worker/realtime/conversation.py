"""The conversation of one realtime session: ordered items, and the text the LLM is given.

Every item is a message. Spoken items keep their transcript (user: what the ASR heard; assistant:
what was said, cut to what the user heard when interrupted) and never their audio: the cascade's
LLM reads text, and holding audio would grow memory with the call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from omnivox.core.errors import ItemNotFound
from omnivox.core.ids import new_id
from omnivox.protocol.chat import ChatMessage

Role = Literal["user", "assistant", "system"]
Status = Literal["completed", "incomplete", "in_progress"]


def item_id() -> str:
    return new_id("item")


@dataclass
class Item:
    role: Role
    audio: bool  # spoken (input_audio / output_audio) rather than typed
    text: str = ""  # the text, or the transcript of the audio
    status: Status = "completed"
    id: str = ""
    audio_ms: float = 0.0  # assistant audio sent, the bound for conversation.item.truncate
    # assistant audio: where each spoken sentence starts (ms into the item's audio) and its text
    spans: list[tuple[float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.id = self.id or item_id()

    def heard_text(self, heard_ms: float) -> str:
        """The words of the sentences heard in the first ``heard_ms``, the last one cut at its share."""
        words: list[str] = []
        for n, (start, text) in enumerate(self.spans):
            if start >= heard_ms:
                break
            end = self.spans[n + 1][0] if n + 1 < len(self.spans) else self.audio_ms
            share = 1.0 if end <= start else min(1.0, (heard_ms - start) / (end - start))
            sentence = text.split()
            words += sentence[: math.ceil(len(sentence) * share)]
        return " ".join(words)

    def truncate(self, heard_ms: float) -> None:
        """Keep only what was heard: the text, and the audio length (later truncations bound to it)."""
        self.text = self.heard_text(heard_ms)
        self.audio_ms = min(self.audio_ms, heard_ms)
        self.spans = [(start, text) for start, text in self.spans if start < heard_ms]

    def wire(self) -> dict[str, Any]:
        if self.role == "assistant":
            part = (
                {"type": "output_audio", "transcript": self.text}
                if self.audio
                else {"type": "output_text", "text": self.text}
            )
        elif self.audio:
            part = {"type": "input_audio", "transcript": self.text or None}
        else:
            part = {"type": "input_text", "text": self.text}
        return {
            "id": self.id,
            "object": "realtime.item",
            "type": "message",
            "status": self.status,
            "role": self.role,
            "content": [part],
        }


class Conversation:
    def __init__(self) -> None:
        self._items: list[Item] = []

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._items)

    @property
    def last_id(self) -> str | None:
        return self._items[-1].id if self._items else None

    def add(self, item: Item, previous_item_id: str | None = None) -> str | None:
        """Insert ``item`` after ``previous_item_id`` ("root": first; None: last); returns the id of
        the item before it. Raises ``ItemNotFound`` for an unknown ``previous_item_id``."""
        if any(i.id == item.id for i in self._items):
            raise ItemNotFound(f"an item with id {item.id!r} already exists", param="item.id")
        if previous_item_id is None:
            before = self.last_id
            self._items.append(item)
            return before
        if previous_item_id == "root":
            self._items.insert(0, item)
            return None
        index = self._index(previous_item_id, "previous_item_id")
        self._items.insert(index + 1, item)
        return previous_item_id

    def get(self, item_id: str) -> Item:
        return self._items[self._index(item_id, "item_id")]

    def delete(self, item_id: str) -> None:
        del self._items[self._index(item_id, "item_id")]

    def messages(self, instructions: str) -> list[ChatMessage]:
        """What the LLM is given: the instructions, then every item that has text, in order."""
        out = [ChatMessage(role="system", content=instructions)] if instructions else []
        out += [ChatMessage(role=i.role, content=i.text) for i in self._items if i.text.strip()]
        return out

    def _index(self, item_id: str, param: str) -> int:
        for n, item in enumerate(self._items):
            if item.id == item_id:
                return n
        raise ItemNotFound(f"no conversation item with id {item_id!r}", param=param)
