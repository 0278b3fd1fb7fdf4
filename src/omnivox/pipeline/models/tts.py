"""The TTS stage: hibari speaking many replies, sentence by sentence, in fixed slots.

A reply's words stream in from the LLM stage (``WordChunk`` s, after a ``VoiceChunk`` with its voice
and speed) and are cut into sentences as ``voice.reply.produce_reply`` cuts them (the first one
short, so the first audio comes early); each sentence is spoken by ``voice.reply.say``. Each
scheduler step synthesises one sentence per thread (``threads``): a reply's first sentence before
any later one (a caller waits for the first; the later ones have the first's
seconds of playback to be ready in), else that of the reply spoken least. Its audio leaves as soon
as the step ends (a step over every due reply would hold each first sentence back until all the
others were spoken), and replies interleave instead of queueing behind each other. Audio streams
back as ``SpokenChunk`` s (``voice.reply.Spoken``); the result, once the words have ended and every
sentence is spoken, is ``ReplySpoken``. A one-shot ``SpeakText`` is spoken the same way.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from omnivox.core.config import Settings
from omnivox.pipeline.models.voice_chunks import (
    ReplySpoken,
    SpeakText,
    VoiceChunk,
    WordChunk,
    llm_output,
    spoken_chunk,
    to_values,
    tts_request,
)
from omnivox.pipeline.schedulers.streaming import StreamingScheduler
from omnivox.pipeline.spec import StageSpec
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.reply import FIRST_WORDS, THEN_WORDS, ReplyRequest, say
from omnivox.voice.stack import build_tts
from omnivox.voice.tts.base import SentenceChunker, StreamingTts

Values = dict[str, Any]
Out = tuple[Literal["stream", "result"], Values]


@dataclass
class Speaking:
    slot: int | None
    chunker: SentenceChunker = field(
        default_factory=lambda: SentenceChunker(first_max_words=FIRST_WORDS, then_max_words=THEN_WORDS)
    )
    sentences: deque[str] = field(default_factory=deque)
    voice: str | None = None
    speed: float | None = None
    ended: bool = False
    spoken: int = 0
    stop: threading.Event = field(default_factory=threading.Event)


class TtsSlots:
    def __init__(self, tts: StreamingTts, threads: int = 1) -> None:
        self.tts = tts
        self.threads = max(1, threads)
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="tts") if threads > 1 else None
        self.sentences = 0
        self.synth_s = 0.0

    def load(self) -> dict[str, float]:
        return {"sentences": float(self.sentences), "synth_s": round(self.synth_s, 3)}

    def needs_slot(self, data: Values) -> bool:
        return True

    def open(self, slot: int | None, data: Values) -> Speaking:
        state = Speaking(slot)
        request = tts_request(data)
        if request is not None:  # a whole text at once (a one-shot, or an LLM result that streamed nothing)
            state.sentences.extend(state.chunker.push(request.text))
            state.sentences.extend(state.chunker.flush())
            state.ended = True
        if isinstance(request, SpeakText):
            self._options(state, VoiceChunk(request.voice, request.speed))
        return state

    def chunk(self, state: Speaking, data: Values) -> None:
        chunk = llm_output(data)
        if isinstance(chunk, VoiceChunk):
            self._options(state, chunk)
        elif isinstance(chunk, WordChunk) and chunk.text:
            state.sentences.extend(state.chunker.push(chunk.text))

    def done(self, state: Speaking, data: Values) -> None:
        state.sentences.extend(state.chunker.flush())
        state.ended = True

    def pending(self, state: Speaking) -> bool:
        return bool(state.sentences) or state.ended

    def step(self, states: list[Speaking]) -> list[list[Out]]:
        waiting = [s for s in states if s.sentences]
        work = sorted(waiting, key=lambda s: s.spoken)[: self.threads]  # stable: the oldest first
        if self._pool is not None and len(work) > 1:
            spoken = dict(zip(map(id, work), self._pool.map(self._speak, work), strict=True))
        else:
            spoken = {id(s): self._speak(s) for s in work}
        outs: list[list[Out]] = []
        for state in states:
            out: list[Out] = [("stream", piece) for piece in spoken.get(id(state), [])]
            if state.ended and not state.sentences:
                out.append(("result", to_values(ReplySpoken(state.spoken))))
            outs.append(out)
        return outs

    def close(self, state: Speaking) -> None:
        state.stop.set()
        state.sentences.clear()

    def reset_slot(self, slot: int) -> None:
        """Nothing of a reply outlives its request."""

    def _speak(self, state: Speaking) -> list[Values]:
        sentence = state.sentences.popleft()
        how = ReplyRequest([], LlmParams(), voice=state.voice, speed=state.speed)
        pieces: list[Values] = []
        for piece in say(self.tts, sentence, how, state.stop):
            self.synth_s += piece.synth_s
            pieces.append(to_values(spoken_chunk(piece)))
        state.spoken += 1
        self.sentences += 1
        return pieces

    @staticmethod
    def _options(state: Speaking, options: VoiceChunk) -> None:
        """A voice or speed given replaces the one held; one left out (None, "") keeps it."""
        if options.voice:
            state.voice = options.voice
        if options.speed is not None:
            state.speed = options.speed


def tts_stage(spec: StageSpec, settings: Settings) -> StreamingScheduler[Speaking]:
    tts = build_tts(settings)
    handler = TtsSlots(tts, threads=spec.threads)
    info = {"model": "hibari", "voices": list(tts.voices), "default_voice": tts.default_voice}
    return StreamingScheduler(handler, spec.slots, info=info)
