"""The LLM stage: the chat model behind a ``ParallelScheduler`` (the runtime batches the requests).

A request is a ``ReplyPrompt`` (``voice_chunks``). The stage runs the LLM half of
``voice.reply.produce_reply`` (so words are cut exactly as in one process) and streams what it yields:
a ``FirstTokenChunk``, then, before the first word, a ``VoiceChunk`` with the prompt's voice and
speed for the TTS stage that reads the stream, then one ``WordChunk`` per whole word. The result is
``ReplyWritten``. The embedded GGUF model runs with ``slots`` parallel
slots in one llama.cpp server (its own continuous batching), and a conversation (``session``) goes
back to the slot that holds its keys and values, as an in-process worker keeps its own; a remote
OpenAI-compatible server (vLLM, SGLang) batches on its own, so the stage is a thin client of it.
A prompt marked ``prefill`` (the user's words so far, while they speak) is computed into the
conversation's own slot (``ChatLlm.prefill_turn``) and answered with an empty ``ReplyWritten``, so
the reply that follows computes only the rest; it never takes a slot holding another conversation.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from omnivox.core.config import Settings
from omnivox.pipeline.models.voice_chunks import (
    FirstTokenChunk,
    ReplyPrompt,
    ReplyWritten,
    VoiceChunk,
    WordChunk,
    reply_prompt,
    to_values,
)
from omnivox.pipeline.schedulers.parallel import ParallelScheduler
from omnivox.pipeline.spec import StageSpec
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import ChatLlm, LlmParams
from omnivox.voice.reply import FirstToken, ReplyRequest, Word, produce_reply
from omnivox.voice.stack import build_llm, context_tokens, llm_kind

Values = dict[str, Any]


class SlotAffinity:
    """Which of the runtime's KV slots each conversation uses: the one it used last if it is free
    (its keys and values are still there, so only the new words are computed), else the least
    recently used free one. A conversation is named by the request's ``session``."""

    def __init__(self, slots: int) -> None:
        self._lock = threading.Lock()
        self._owner: list[str | None] = [None] * slots  # session whose state each slot holds
        self._busy = [False] * slots
        self._used = [0.0] * slots
        self.hits = 0
        self.misses = 0

    def take(self, session: str | None, own: bool = False) -> int | None:
        """A slot for ``session``'s request (None: the runtime picks). ``own``: only its own slot or
        one no conversation holds (a prefill does not evict another conversation for a guess)."""
        with self._lock:
            free = [i for i, busy in enumerate(self._busy) if not busy]
            if own:
                free = [i for i in free if self._owner[i] in (session, None)]
            if not free or session is None:
                return None  # the runtime picks (it queues the request until a slot frees)
            mine = [i for i in free if self._owner[i] == session]
            slot = mine[0] if mine else min(free, key=lambda i: self._used[i])
            if not own:  # (a prefill's slot is counted with its reply's)
                self.hits += bool(mine)
                self.misses += not mine
            self._owner[slot], self._busy[slot] = session, True
            return slot

    def give_back(self, slot: int | None) -> None:
        if slot is None:
            return
        with self._lock:
            self._busy[slot] = False
            self._used[slot] = time.monotonic()


def reply_runner(
    llm: ChatLlm, affinity: SlotAffinity | None = None
) -> Callable[[Values, threading.Event, Callable[[Values], None]], Values]:
    def run(data: Values, stop: threading.Event, emit: Callable[[Values], None]) -> Values:
        prompt = reply_prompt(data)
        if prompt.prefill:
            return prefill(llm, affinity, prompt)
        slot = affinity.take(prompt.session) if affinity is not None else None
        try:
            params = LlmParams(temperature=prompt.temperature, max_tokens=prompt.max_tokens, cache_slot=slot)
            messages = [ChatMessage.model_validate(m) for m in prompt.messages]
            request = ReplyRequest(messages, params, speak=False)
            said: list[str] = []
            for piece in produce_reply(llm, None, request, stop):  # its LLM half: no TTS
                if isinstance(piece, FirstToken):
                    emit(to_values(FirstTokenChunk(piece.after_s)))
                elif isinstance(piece, Word):
                    if not said:
                        emit(to_values(VoiceChunk(prompt.voice, prompt.speed)))
                    said.append(piece.text)
                    emit(to_values(WordChunk(piece.text)))
            return to_values(ReplyWritten("".join(said), len(said)))
        finally:
            if affinity is not None:
                affinity.give_back(slot)

    return run


def prefill(llm: ChatLlm, affinity: SlotAffinity | None, prompt: ReplyPrompt) -> Values:
    """Compute ``prompt`` into its conversation's slot ahead of the reply (nothing when the slots
    are shared without affinity, or none of its own is free: the reply then computes it all)."""
    slot = affinity.take(prompt.session, own=True) if affinity is not None else None
    if affinity is not None and slot is None:
        return to_values(ReplyWritten("", 0))
    try:
        messages = [ChatMessage.model_validate(m) for m in prompt.messages]
        llm.prefill_turn(messages, LlmParams(cache_slot=slot))
    finally:
        if affinity is not None:
            affinity.give_back(slot)
    return to_values(ReplyWritten("", 0))


class ServerSlots(ChatLlm):
    """Several llama.cpp runtimes as one LLM whose slots are numbered across them (slot ``i`` is
    slot ``i // n`` of runtime ``i % n``, so consecutive slots alternate runtimes). One runtime
    batches its slots on its thread(s); more runtimes use more cores without llama.cpp's threads
    spinning against each other, which one runtime with several threads does on a busy machine."""

    def __init__(self, servers: Sequence[ChatLlm]) -> None:
        self.servers = list(servers)
        self.name = self.servers[0].name
        self.vision = self.servers[0].vision
        self._next = itertools.count()

    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: LlmParams | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[str]:
        p = params or LlmParams()
        n = len(self.servers)
        if p.cache_slot is None:  # no slot of its own: the runtimes in turn (each queues it)
            return self.servers[next(self._next) % n].stream(messages, p, stop)
        local = dataclasses.replace(p, cache_slot=p.cache_slot // n)
        return self.servers[p.cache_slot % n].stream(messages, local, stop)

    def prefill_turn(self, messages: Sequence[ChatMessage], params: LlmParams | None = None) -> None:
        p = params or LlmParams()
        if p.cache_slot is None:
            return  # no slot of its own: nothing to keep computed for it
        n = len(self.servers)
        local = dataclasses.replace(p, cache_slot=p.cache_slot // n)
        self.servers[p.cache_slot % n].prefill_turn(messages, local)

    def warm(self, messages: Sequence[ChatMessage]) -> None:
        for server in self.servers:
            server.warm(messages)

    def close(self) -> None:
        for server in self.servers:
            server.close()


def llamacpp_stage(spec: StageSpec, settings: Settings) -> ParallelScheduler:
    from omnivox.voice.llm.llamacpp_llm import LlamaCppLlm
    from omnivox.voice.stack import LOCAL_REQUEST_OPTIONS, max_reply_tokens

    budget = context_tokens(settings.model_copy(update={"llm": "local"}))
    # options.servers: llama.cpp runtimes sharing the slots (each a thread, or ``threads``)
    servers = max(1, min(spec.slots, int(spec.options.get("servers", 1))))
    runtimes = [
        LlamaCppLlm(
            threads=spec.threads if spec.threads > 1 else settings.llm_threads,
            context_tokens=budget + budget // 2,
            max_tokens=max_reply_tokens(settings.model_copy(update={"llm": "local"})),
            max_sentences=settings.llm_max_sentences or None,
            exact=False,
            request_options=LOCAL_REQUEST_OPTIONS,
            parallel=len(range(i, spec.slots, servers)),  # slots i, i + servers, ...
            # a conversation's next turn may land in another slot: llama.cpp keeps the slots' states
            # in RAM and restores the longest matching prefix, so it still computes only the new words
            ram_cache_mib=int(spec.options.get("ram_cache_mib", 256)),
        )
        for i in range(servers)
    ]
    llm: ChatLlm = runtimes[0] if servers == 1 else ServerSlots(runtimes)
    if settings.system_prompt:  # in every slot, as each worker's own stack does at start-up
        from omnivox.protocol.chat import ChatMessage

        llm.warm([ChatMessage(role="system", content=settings.system_prompt)])
    affinity = SlotAffinity(spec.slots)
    scheduler = ParallelScheduler(
        reply_runner(llm, affinity), slots=spec.slots, info={"model": llm.name, "vision": False}
    )
    scheduler.extra_load = lambda: {"kv_hits": float(affinity.hits), "kv_misses": float(affinity.misses)}
    return scheduler


def chat_stage(spec: StageSpec, settings: Settings) -> ParallelScheduler:
    """The LLM the voice settings choose (``--llm``, ``--llm-url``): the embedded GGUF on parallel
    slots, a remote server, or echo (for tests)."""
    kind = llm_kind(settings)
    if kind == "local":
        return llamacpp_stage(spec, settings)
    if kind == "openai":
        return openai_stage(spec, settings)
    llm = build_llm(settings)
    return ParallelScheduler(reply_runner(llm), slots=spec.slots, info={"model": llm.name, "vision": False})


def openai_stage(spec: StageSpec, settings: Settings) -> ParallelScheduler:
    """A client of a remote OpenAI-compatible server (``llm_url``): the heavy LLM runs on an engine
    built for many machines; ``slots`` bounds the requests in flight to it."""
    if llm_kind(settings) != "openai":
        settings = settings.model_copy(update={"llm": "openai"})
    llm = build_llm(settings)
    return ParallelScheduler(
        reply_runner(llm), slots=spec.slots, info={"model": llm.name, "vision": llm.vision}
    )
