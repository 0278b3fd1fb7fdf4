"""The tiny engine's byte-level chat codec, its token ids and its model's shape (shared by its text
and duplex modes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omnivox.voice.llm.chat_codec import Conversation

# Ids 0-255 are bytes; the rest mark roles and the end of a turn.
SYSTEM, USER, ASSISTANT, END = 256, 257, 258, 259
VOCAB_SIZE = 260
_ROLE_IDS = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT}


class ByteChatCodec:
    """A conversation as bytes between role markers: ``<role> utf-8 bytes <end>`` per message.

    Generation may pick only printable ASCII and ``<end>``, so every reply is text that survives a
    JSON round trip through a client unchanged and encodes back to the very bytes generated.
    """

    stop_ids = frozenset({END})
    allowed_ids: Sequence[int] = (*range(0x20, 0x7F), END)

    def encode_chat(self, conversation: Conversation, add_generation_prompt: bool) -> list[int]:
        ids: list[int] = []
        for turn in conversation:
            ids.append(_ROLE_IDS[turn["role"]])
            ids.extend(turn["content"].encode("utf-8"))
            ids.append(END)
        if add_generation_prompt:
            ids.append(ASSISTANT)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


def tiny_qwen2_config(vocab_size: int, hidden_size: int, num_layers: int, num_heads: int) -> Any:
    """The config of a tiny random Qwen2 over byte ids (``transformers`` is imported here, lazily)."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=max(1, num_heads // 2),  # grouped-query attention, as real models use
        max_position_embeddings=1 << 20,
        # Larger than the usual 0.02 so outputs vary (and replies sometimes end) instead of one byte
        # repeated.
        initializer_range=0.2,
        bos_token_id=None,
        eos_token_id=END,
        pad_token_id=None,
    )
