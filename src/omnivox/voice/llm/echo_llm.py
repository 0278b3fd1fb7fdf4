"""The echo LLM: says the user's last words back, prefixed so nobody mistakes it for a model.

It is the embedded default when no LLM server is configured, so a fresh install can hold a whole
voice conversation (VAD, ASR, TTS, turn-taking, barge-in) with nothing else running.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence

from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import ChatLlm, LlmParams, last_user_text

_PIECES = re.compile(r"\s*\S+")


class EchoLlm(ChatLlm):
    """Streams ``prefix + <last user text>`` word by word, ``delay_s`` apart (imitating a model)."""

    name = "echo"

    def __init__(
        self,
        prefix: str = "You said: ",
        empty_reply: str = "I did not hear any words to echo.",
        delay_s: float = 0.0,
    ) -> None:
        self.prefix = prefix
        self.empty_reply = empty_reply
        self.delay_s = delay_s

    def reply_for(self, messages: Sequence[ChatMessage]) -> str:
        text = last_user_text(messages)
        return self.prefix + text if text else self.empty_reply

    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: LlmParams | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[str]:
        stop = stop or threading.Event()
        pieces = _PIECES.findall(self.reply_for(messages))
        if params is not None and params.max_tokens is not None:
            pieces = pieces[: params.max_tokens]  # one word stands in for one token
        for i, piece in enumerate(pieces):
            # wait() rather than sleep(): a barge-in ends the echo at once
            if stop.is_set() or (i and self.delay_s and stop.wait(self.delay_s)):
                return
            yield piece
