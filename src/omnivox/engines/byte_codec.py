"""The tiny engine's byte-level chat codec and its token ids (shared by its text and duplex modes)."""

from __future__ import annotations

from collections.abc import Sequence

from omnivox.engines.hf import Conversation

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
