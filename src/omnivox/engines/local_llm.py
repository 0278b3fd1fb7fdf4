"""A local transformers model as the cascade's chat LLM, keeping its KV cache across replies.

The cascade hands the LLM the whole (trimmed) conversation for every reply. ``TransformersEngine``
keeps the ids its cache holds, so ``set_conversation`` computes only what differs from the previous
call: usually the last user message, since the previous reply is already in the cache.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from omnivox.engines.base import GenerateParams, GenResult
from omnivox.engines.hf import TransformersEngine
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import ChatLlm, LlmParams

DEFAULT_MAX_TOKENS = 256


class LocalChatLlm(ChatLlm):
    def __init__(self, engine: TransformersEngine) -> None:
        self.engine = engine
        self.name = f"local:{engine.name}"

    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: LlmParams | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[str]:
        p = params or LlmParams()
        self.engine.set_conversation(messages)
        gen = GenerateParams(max_new_tokens=p.max_tokens or DEFAULT_MAX_TOKENS, temperature=p.temperature)
        for chunk in self.engine.generate(gen, stop or threading.Event(), GenResult()):
            if chunk.text_delta:
                yield chunk.text_delta

    def close(self) -> None:
        self.engine.close()
