"""Conversation history for the LLM: trimmed to a context budget, and the reply temperature.

Token counts are approximate (about four characters per token for English with BPE tokenizers, plus a
few tokens of chat-template framing per message): the cascade talks to arbitrary remote servers
whose tokenizers it does not have, and a budget only needs to be safely close.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from omnivox.protocol.chat import ChatMessage

CHARS_PER_TOKEN = 4.0
MESSAGE_OVERHEAD_TOKENS = 4  # role markers and separators of a chat template


def approx_tokens(text: str) -> int:
    """Approximate token count of ``text``."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def message_tokens(message: ChatMessage) -> int:
    return approx_tokens(message.text()) + MESSAGE_OVERHEAD_TOKENS


def history_tokens(messages: Sequence[ChatMessage]) -> int:
    return sum(message_tokens(m) for m in messages)


def trim_history(
    messages: Sequence[ChatMessage], max_tokens: int, reserve_tokens: int = 0
) -> list[ChatMessage]:
    """The longest recent part of ``messages`` that fits ``max_tokens - reserve_tokens``.

    Leading system messages (the prompt) and the last message are always kept, even over budget;
    between them, the oldest messages go first. A kept history never starts with an assistant
    message after the system prompt, since many chat templates require a user turn first.
    """
    msgs = list(messages)
    if not msgs:
        return []
    n_system = 0
    while n_system < len(msgs) - 1 and msgs[n_system].role == "system":
        n_system += 1
    head, body = msgs[:n_system], msgs[n_system:]
    budget = max_tokens - reserve_tokens - history_tokens(head) - message_tokens(body[-1])
    kept = [body[-1]]
    for m in reversed(body[:-1]):
        cost = message_tokens(m)
        if cost > budget:
            break
        budget -= cost
        kept.append(m)
    kept.reverse()
    while len(kept) > 1 and kept[0].role in ("assistant", "tool"):  # a tool message needs its call
        kept.pop(0)
    return head + kept


@dataclass(frozen=True)
class ReplyTemperature:
    """A livelier first reply, steadier ones after (Unmute uses 0.7 then 0.3)."""

    first: float = 0.7
    later: float = 0.3

    def for_history(self, messages: Sequence[ChatMessage]) -> float:
        """``first`` while the assistant has not spoken yet in ``messages``, else ``later``."""
        return self.later if any(m.role == "assistant" for m in messages) else self.first
