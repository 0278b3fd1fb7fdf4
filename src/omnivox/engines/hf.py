"""A local transformers causal LM as an engine, with exact KV-cache reuse across turns.

The engine holds two things that always agree: the conversation (its messages) and the token ids
whose keys and values are in its ``DynamicCache``. Every operation first names the ids the cache
should hold next (the chat template's render of the conversation), keeps the longest common prefix
of what it already holds, and runs the model only on the rest. So after any sequence of prefills and
generations, cut short or not, the cache holds exactly the ids a single full prefill of the same
conversation would compute: a cache hit changes how much work is done, never the result.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from omnivox.core.errors import ContextTooLong, Interrupted, PrefillRequired
from omnivox.engines.base import ChatModel, Engine, GenChunk, GenerateParams, GenResult, PrefillStats
from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.control.workers import Capabilities
from omnivox.voice.llm.causal_lm import cache_argument, forward_params, load_causal_lm, new_cache
from omnivox.voice.llm.chat_codec import ChatCodec, IncrementalDetokenizer, common_prefix, message_text

PREFILL_CHUNK = 512  # ids per forward pass of a prefill (the interrupt is checked between them)
DEFAULT_CONTEXT_TOKENS = 8192


class TransformersEngine(Engine, ChatModel):
    """Any causal LM with a chat template, on CPU or CUDA; text in, streamed text out."""

    name = "transformers"
    capabilities = Capabilities(streaming=True)

    @property
    def chat(self) -> ChatModel:
        return self  # it is its own turn-based chat model

    def __init__(
        self,
        model: Any,
        codec: ChatCodec,
        *,
        device: str | torch.device | None = None,
        seed: int = 0,
        max_context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    ):
        self.model = model.eval()
        self.max_context_tokens = max_context_tokens  # a longer conversation is refused before compute
        self.codec = codec
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self._messages: list[ChatMessage] = []
        self._ids: list[int] = []  # exactly the ids whose keys/values self._cache holds
        self._cache: Any = None
        self._rng = torch.Generator(device=self.device).manual_seed(seed)
        self._mask: torch.Tensor | None = None
        self._pass_logits_to_keep = "logits_to_keep" in forward_params(model)
        self._cache_arg = cache_argument(model)

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        device: str = "cpu",
        dtype: torch.dtype | str | None = None,
        seed: int = 0,
        max_context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    ) -> TransformersEngine:
        """Load a local Hugging Face model directory (never the hub): model, tokenizer, chat template."""
        model, codec = load_causal_lm(path, device, dtype)
        limit = min(
            max_context_tokens, getattr(model.config, "max_position_embeddings", None) or max_context_tokens
        )
        engine = cls(model, codec, device=device, seed=seed, max_context_tokens=limit)
        engine.name = f"transformers:{Path(path).name}"
        return engine

    # ---- the Engine contract

    def reset(self) -> None:
        self._messages = []
        self._ids = []
        self._cache = None

    def prefill(self, messages: list[ChatMessage]) -> PrefillStats:
        for m in messages:
            message_text(m)  # reject the whole batch before anything changes
        held = len(self._messages)
        self._messages.extend(m.model_copy(deep=True) for m in messages)
        try:
            cached, computed, _ = self._sync(self._render(add_generation_prompt=False), need_logits=False)
        except BaseException:
            # Keep the conversation as it was; the cache may be shorter now, and the next call
            # recomputes whatever it lacks.
            del self._messages[held:]
            raise
        return PrefillStats(len(self._ids), len(self._messages), cached, computed)

    def set_conversation(self, messages: Sequence[ChatMessage]) -> PrefillStats:
        """Hold exactly ``messages`` from now on, reusing the cache's common prefix with them.

        This is how a caller that keeps its own history (the cascade's LLM) gets KV reuse: each
        reply re-sends the whole conversation and only what changed since the last one is computed.
        """
        for m in messages:
            message_text(m)
        held = self._messages
        self._messages = [m.model_copy(deep=True) for m in messages]
        try:
            cached, computed, _ = self._sync(self._render(add_generation_prompt=False), need_logits=False)
        except BaseException:
            self._messages = held
            raise
        return PrefillStats(len(self._ids), len(self._messages), cached, computed)

    def generate(
        self, params: GenerateParams, stop: threading.Event, result: GenResult
    ) -> Iterator[GenChunk]:
        target = self._render(add_generation_prompt=True)
        if not target:
            raise PrefillRequired("nothing to answer: prefill a conversation first")
        _, _, logits = self._sync(target, need_logits=True)
        detok = IncrementalDetokenizer(self.codec.decode)
        pending = 0  # tokens picked since the last chunk (their text may still be unfinished)
        failed = False
        try:
            while len(detok.ids) < params.max_new_tokens and len(self._ids) < self.max_context_tokens:
                if stop.is_set():
                    result.stopped = True
                    break
                if detok.ids:
                    # Fed lazily, after the stop check: a stop costs no extra forward pass.
                    logits = self._feed([detok.ids[-1]])
                token = self._pick(logits, params.temperature)
                if token in self.codec.stop_ids:
                    break
                delta = detok.push(token)
                pending += 1
                result.generated_tokens = len(detok.ids)
                if delta:
                    yield GenChunk(text_delta=delta, tokens=pending)
                    pending = 0
        except GeneratorExit:
            result.stopped = True  # the consumer went away: hold what it was sent
            raise
        except BaseException:
            failed = True
            raise
        finally:
            self._finish(detok, result, sync=not failed)

    @property
    def kv_length(self) -> int:
        return len(self._ids)

    def held_messages(self) -> list[ChatMessage]:
        return list(self._messages)

    @property
    def token_ids(self) -> tuple[int, ...]:
        """The ids whose keys and values the cache holds (for tests and diagnostics)."""
        return tuple(self._ids)

    def expected_ids(self) -> list[int]:
        """The ids a full prefill of the held conversation computes (``token_ids`` after every call)."""
        return self._render(add_generation_prompt=False)

    def close(self) -> None:
        self.reset()

    # ---- internals

    def _render(self, add_generation_prompt: bool) -> list[int]:
        conversation = [{"role": m.role, "content": message_text(m)} for m in self._messages]
        return self.codec.encode_chat(conversation, add_generation_prompt)

    def _finish(self, detok: IncrementalDetokenizer, result: GenResult, sync: bool) -> None:
        """Hold the reply as the client saw it and bring the cache to its full render."""
        result.text = detok.text
        result.generated_tokens = len(detok.ids)
        self._messages.append(ChatMessage(role="assistant", content=detok.text))
        # The template may close the turn (end-of-turn, newline), may tokenize the reply text
        # differently from how it was generated, and never contains the held-back bytes of an
        # unfinished character; syncing to the render covers all three. After a failure the next
        # call syncs instead, so a broken model is not run again here.
        if sync:
            self._sync(self._render(add_generation_prompt=False), need_logits=False)

    def _sync(self, target: list[int], need_logits: bool) -> tuple[int, int, torch.Tensor | None]:
        """Make the cache hold exactly ``target``; return (ids reused, ids computed, last logits).

        A ``target`` past the context is refused before any compute (``ContextTooLong``)."""
        if len(target) > self.max_context_tokens:
            raise ContextTooLong(
                f"the conversation is {len(target)} tokens; this model takes at most "
                f"{self.max_context_tokens}",
                tokens=len(target),
                limit=self.max_context_tokens,
            )
        keep = common_prefix(self._ids, target)
        if need_logits:
            keep = min(keep, len(target) - 1)  # the last id must run again to give its logits
        self._truncate(keep)
        reused = len(self._ids)
        logits = None
        for at in range(reused, len(target), PREFILL_CHUNK):
            if at > reused and self.interrupt.is_set():
                raise Interrupted("the session ended during the prefill")
            logits = self._feed(target[at : at + PREFILL_CHUNK])
        return reused, len(target) - reused, logits

    def _truncate(self, keep: int) -> None:
        if keep >= len(self._ids):
            return
        if keep > 0 and self._cache is not None:
            try:
                with torch.inference_mode():
                    # A negative count removes that many ids in both transformers 4.x and 5.x.
                    self._cache.crop(keep - len(self._ids))
                if self._cache.get_seq_length() == keep:
                    del self._ids[keep:]
                    return
            except (ValueError, RuntimeError):
                pass  # sliding-window layers past their window cannot roll back: start over
        self._ids = []
        self._cache = None

    def _feed(self, ids: list[int]) -> torch.Tensor | None:
        """Run the model on ``ids`` after the cached ones; return the last position's logits."""
        if not ids:
            return None
        if self._cache is None:
            self._cache = new_cache(self.model)
        start = len(self._ids)
        kwargs: dict[str, Any] = {self._cache_arg: self._cache}
        if self._pass_logits_to_keep:
            kwargs["logits_to_keep"] = 1
        try:
            with torch.inference_mode():
                out = self.model(
                    input_ids=torch.tensor([ids], device=self.device),
                    position_ids=torch.arange(start, start + len(ids), device=self.device).unsqueeze(0),
                    use_cache=True,
                    **kwargs,
                )
        except BaseException:
            # A forward that fails part-way leaves layers of different lengths.
            self._ids = []
            self._cache = None
            raise
        self._cache = getattr(out, "past_key_values", None) or self._cache  # (updated in place)
        self._ids.extend(ids)
        return out.logits[0, -1]

    def _pick(self, logits: torch.Tensor | None, temperature: float | None) -> int:
        assert logits is not None
        with torch.inference_mode():
            allowed = self.codec.allowed_ids
            if allowed is not None:
                if self._mask is None or self._mask.shape != logits.shape:
                    mask = torch.full_like(logits, float("-inf"))
                    mask[list(allowed)] = 0
                    self._mask = mask
                logits = logits + self._mask
            if not temperature or temperature <= 0:  # None (the default) is greedy too
                return int(torch.argmax(logits))
            probs = torch.softmax(logits.float() / temperature, dim=-1)
            return int(torch.multinomial(probs, 1, generator=self._rng))
