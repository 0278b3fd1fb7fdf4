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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import torch

from omnivox.core.errors import ContextTooLong, Interrupted, PrefillRequired, UnsupportedContent
from omnivox.engines.base import Engine, GenChunk, GenerateParams, GenResult, PrefillStats
from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.workers import Capabilities

Conversation = list[dict[str, str]]
PREFILL_CHUNK = 512  # ids per forward pass of a prefill (the interrupt is checked between them)
DEFAULT_CONTEXT_TOKENS = 8192

# End-of-turn markers of common chat templates. Base checkpoints often name only their document
# end as ``eos``, so without these an instruct conversation would run on past its turn.
_END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>")


class ChatCodec(Protocol):
    """What the engine needs from a tokenizer: a conversation to ids, and ids back to text."""

    stop_ids: frozenset[int]  # ids that end the assistant's turn; never part of the reply text
    allowed_ids: Sequence[int] | None  # the only ids generation may pick (None: any)

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
    """The text a text-only engine renders for ``message``.

    Uses the canonical form that the routing hash uses, so two conversations with one hash render
    to the same ids; image and audio parts raise ``UnsupportedContent``.
    """
    content = message.canonical()
    if not isinstance(content, str):
        kinds = sorted({p["type"] for p in content if p.get("type") != "text"})
        raise UnsupportedContent(f"this engine takes text only, not {', '.join(kinds)}", parts=kinds)
    return content


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class TransformersEngine(Engine):
    """Any causal LM with a chat template, on CPU or CUDA; text in, streamed text out."""

    name = "transformers"
    capabilities = Capabilities(streaming=True)

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
        self._pass_logits_to_keep = "logits_to_keep" in _forward_params(model)

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
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"{path}: the tokenizer has no chat_template; this engine renders conversations")
        model = AutoModelForCausalLM.from_pretrained(
            str(path), local_files_only=True, dtype=dtype or _default_dtype(device)
        )
        model.to(device)
        limit = min(
            max_context_tokens, getattr(model.config, "max_position_embeddings", None) or max_context_tokens
        )
        codec = HFChatCodec.for_model(tokenizer, model)
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
            self._cache = _new_cache(self.model)
        start = len(self._ids)
        kwargs: dict[str, Any] = {"logits_to_keep": 1} if self._pass_logits_to_keep else {}
        try:
            with torch.inference_mode():
                out = self.model(
                    input_ids=torch.tensor([ids], device=self.device),
                    position_ids=torch.arange(start, start + len(ids), device=self.device).unsqueeze(0),
                    past_key_values=self._cache,
                    use_cache=True,
                    **kwargs,
                )
        except BaseException:
            # A forward that fails part-way leaves layers of different lengths.
            self._ids = []
            self._cache = None
            raise
        self._cache = out.past_key_values
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


def _new_cache(model: Any) -> Any:
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # transformers before the config argument
        return DynamicCache()


def _forward_params(model: Any) -> set[str]:
    import inspect

    return set(inspect.signature(model.forward).parameters)


def _default_dtype(device: str) -> torch.dtype:
    if str(device).startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32
