"""Token ids for the local transformers engines: conversations to ids (a chat template, or the tiny
engine's bytes), ids back to text as it streams, and what the engines compare caches with."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from omnivox.core.errors import UnsupportedContent
from omnivox.protocol.chat import ChatMessage

Conversation = list[dict[str, str]]

# End-of-turn markers of common chat templates. Base checkpoints often name only their document
# end as ``eos``, so without these an instruct conversation would run on past its turn.
_END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>")


class ChatCodec(Protocol):
    """What the engine needs from a tokenizer: a conversation to ids, and ids back to text."""

    @property
    def stop_ids(self) -> frozenset[int]:
        """Ids that end the assistant's turn; never part of the reply text."""
        ...

    @property
    def allowed_ids(self) -> Sequence[int] | None:
        """The only ids generation may pick (None: any)."""
        ...

    def encode_chat(self, conversation: Conversation, add_generation_prompt: bool) -> list[int]:
        """Token ids of the whole conversation as the chat template renders it."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens left out; a split UTF-8 character decodes to U+FFFD."""
        ...


class HFChatCodec:
    """A Hugging Face tokenizer with a chat template, behind the ``ChatCodec`` interface."""

    allowed_ids: Sequence[int] | None = None

    def __init__(self, tokenizer: Any, stop_ids: Sequence[int]) -> None:
        self.tokenizer = tokenizer
        self.stop_ids = frozenset(stop_ids)

    @classmethod
    def for_model(cls, tokenizer: Any, model: Any) -> HFChatCodec:
        """Stop on the model's and tokenizer's eos ids and on a known end-of-turn token if defined."""
        stop: set[int] = set()
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        for value in (eos, tokenizer.eos_token_id):
            if isinstance(value, int):
                stop.add(value)
            elif value:
                stop.update(int(v) for v in value)
        added = tokenizer.get_added_vocab()
        stop.update(added[t] for t in _END_OF_TURN_TOKENS if t in added)
        return cls(tokenizer, sorted(stop))

    def encode_chat(self, conversation: Conversation, add_generation_prompt: bool) -> list[int]:
        if not conversation:
            return []  # many templates index messages[0]
        # Render to text, then encode without extra specials: the template already placed any bos.
        text = self.tokenizer.apply_chat_template(
            conversation, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)


class IncrementalDetokenizer:
    """Turns a growing list of token ids into text deltas, never splitting a character.

    Each step re-decodes a short window that starts one emitted chunk back, because tokenizers
    decode a token differently at the start of a sequence (a dropped leading space) than after
    others; the delta is the window's text past what was already emitted. A window that ends in
    U+FFFD is an unfinished UTF-8 sequence, held until its last byte arrives.
    """

    def __init__(self, decode: Callable[[Sequence[int]], str]) -> None:
        self._decode = decode
        self.ids: list[int] = []
        self.text = ""  # everything emitted so far: exactly what the client has seen
        self._prefix = 0
        self._read = 0

    def push(self, token_id: int) -> str:
        """Add one token; return the text it completes ("" while a character is unfinished)."""
        self.ids.append(token_id)
        before = self._decode(self.ids[self._prefix : self._read])
        now = self._decode(self.ids[self._prefix :])
        if len(now) <= len(before) or now.endswith("\ufffd"):
            return ""
        delta = now[len(before) :]
        self._prefix, self._read = self._read, len(self.ids)
        self.text += delta
        return delta


def message_text(message: ChatMessage) -> str:
    """The text a text-only model renders for ``message``.

    Uses the canonical form that the routing hash uses, so two conversations with one hash render
    to the same ids; image and audio parts raise ``UnsupportedContent``.
    """
    content = message.canonical()
    if not isinstance(content, str):
        kinds = sorted({p["type"] for p in content if p.get("type") != "text"})
        raise UnsupportedContent(f"this model takes text only, not {', '.join(kinds)}", parts=kinds)
    return content


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
