"""The ASR stage: one Whisper model hearing many sessions in fixed slots, decoding them in batches.

Seed 004's batched STT on the pipeline's streaming scheduler: a realtime session holds a slot for
its life (its hearing request, ``TranscribeStream``); its audio arrives as stream chunks and is
buffered per utterance. Each scheduler step gathers every due decode of every slot (final
transcripts first, then live partials, at most ``batch``) and runs them as one batched Whisper call.
A session's chunks (``voice_chunks``) say what to do:

- ``UtteranceAudio``: more of the current utterance (float32, 16 kHz);
- ``UtteranceEnd(n)``: utterance ``n`` ended: its ``FinalTranscript`` comes back;
- ``UtteranceDrop``: forget the utterance in progress.

A ``PartialTranscript`` comes at most every ``asr_partial_ms`` of new audio per slot, and never in
a step that has a final to decode (a final is what a turn waits for); all the sessions' partials
together take at most ``partial_budget`` of the stage's time (as one in-process Whisper's partials
do), so more sessions get rarer partials, not later finals. A one-shot request (``TranscribeClip``,
a streaming turn's audio part) takes no slot and ends with a ``ClipTranscript``. A freed slot is
reset (its buffers dropped) before the next session gets it.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from omnivox.core.config import Settings
from omnivox.pipeline.models.voice_chunks import (
    ClipTranscript,
    FinalTranscript,
    PartialTranscript,
    StreamTranscribed,
    TranscribeClip,
    UtteranceAudio,
    UtteranceDrop,
    asr_input,
    asr_request,
    to_values,
)
from omnivox.pipeline.schedulers.streaming import StreamingScheduler
from omnivox.pipeline.spec import StageSpec
from omnivox.voice.asr.whisper_asr import WhisperAsr
from omnivox.voice.stack import ASR_RATE

Values = dict[str, Any]
Out = tuple[Literal["stream", "result"], Values]
MIN_PARTIAL_S = 0.5


@dataclass
class Transcribing:
    """One request's state in the ASR stage: a session's utterances, or a one-shot clip."""

    slot: int | None
    chunks: list[np.ndarray] = field(default_factory=list)
    samples: int = 0
    utterance: int = 0
    next_partial: int = int(MIN_PARTIAL_S * ASR_RATE)
    finals: deque[tuple[int, np.ndarray]] = field(default_factory=deque)  # (utterance, audio) to decode
    oneshot: bool = False
    ended: bool = False
    heard: int = 0  # finals sent


class WhisperSlots:
    """The stream handler of the ASR stage (see the module doc)."""

    def __init__(self, asr: WhisperAsr, partial_ms: int, batch: int, partial_budget: float = 0.15) -> None:
        self.asr = asr
        self.partial_samples = int(partial_ms * ASR_RATE / 1000) if partial_ms else 0
        self.batch = max(1, batch)
        self.partial_budget = partial_budget
        self._partials_after = 0.0  # monotonic time before which no partial step runs
        self.calls = 0  # batched decodes, and the clips they held (batch occupancy)
        self.items = 0
        self.max_items = 0
        self.decode_s = 0.0
        self.final_s = 0.0  # of decode_s: steps that held a final (a turn waits on them), partials' only
        self.partial_s = 0.0
        self.finals = 0
        self.partials = 0

    def load(self) -> dict[str, float]:
        return {
            "decode_calls": float(self.calls),
            "decode_items": float(self.items),
            "decode_max_batch": float(self.max_items),
            "decode_s": round(self.decode_s, 3),
            "final_decode_s": round(self.final_s, 3),
            "partial_decode_s": round(self.partial_s, 3),
            "finals": float(self.finals),
            "partials": float(self.partials),
        }

    def needs_slot(self, data: Values) -> bool:
        return not isinstance(asr_request(data), TranscribeClip)

    def open(self, slot: int | None, data: Values) -> Transcribing:
        state = Transcribing(slot)
        request = asr_request(data)
        if isinstance(request, TranscribeClip):
            state.oneshot = state.ended = True
            state.finals.append((0, np.asarray(request.audio, np.float32)))
        return state

    def chunk(self, state: Transcribing, data: Values) -> None:
        chunk = asr_input(data)
        if isinstance(chunk, UtteranceAudio):
            if len(chunk.audio):
                state.chunks.append(np.asarray(chunk.audio, np.float32))
                state.samples += len(chunk.audio)
        elif isinstance(chunk, UtteranceDrop):
            self._restart(state, state.utterance + 1)
        else:  # UtteranceEnd
            state.finals.append((chunk.utterance, self._audio(state)))
            self._restart(state, chunk.utterance + 1)

    def done(self, state: Transcribing, data: Values) -> None:
        state.ended = True

    def pending(self, state: Transcribing) -> bool:
        partial = self._partial_due(state) and time.monotonic() >= self._partials_after
        return bool(state.finals) or (state.ended and not state.oneshot) or partial

    def step(self, states: list[Transcribing]) -> list[list[Out]]:
        jobs: list[tuple[int, str, int, np.ndarray]] = []  # (state index, kind, utterance, audio)
        for i, state in enumerate(states):
            while state.finals and len(jobs) < self.batch:
                n, audio = state.finals.popleft()
                jobs.append((i, "final", n, audio))
        partial_step = not jobs and time.monotonic() >= self._partials_after
        for i, state in enumerate(states):
            if partial_step and len(jobs) < self.batch and self._partial_due(state):
                state.next_partial = state.samples + self.partial_samples
                jobs.append((i, "partial", state.utterance, self._audio(state)))
        began = time.monotonic()
        texts = self._decode([audio for *_, audio in jobs])
        took = time.monotonic() - began
        if not jobs:
            pass
        elif partial_step:
            self.partial_s += took
            self.partials += len(jobs)
        else:
            self.final_s += took
            self.finals += len(jobs)
        if partial_step and jobs:
            self._partials_after = time.monotonic() + took * (1 - self.partial_budget) / self.partial_budget
        outs: list[list[Out]] = [[] for _ in states]
        for (i, kind, n, _), text in zip(jobs, texts, strict=True):
            state = states[i]
            if state.oneshot:
                outs[i].append(("result", to_values(ClipTranscript(text))))
            elif kind == "final":
                state.heard += 1
                outs[i].append(("stream", to_values(FinalTranscript(n, text))))
            elif text and n == state.utterance:
                outs[i].append(("stream", to_values(PartialTranscript(n, text))))
        for i, state in enumerate(states):
            if state.ended and not state.oneshot and not state.finals:
                outs[i].append(("result", to_values(StreamTranscribed(state.heard))))
        return outs

    def close(self, state: Transcribing) -> None:
        self._restart(state, state.utterance)
        state.finals.clear()

    def reset_slot(self, slot: int) -> None:
        """A slot's state lives in its request; nothing of a session outlives it."""

    # ---- internals

    def _decode(self, clips: list[np.ndarray]) -> list[str]:
        if not clips:
            return []
        began = time.perf_counter()
        texts = self.asr.transcribe_batch(clips)
        self.decode_s += time.perf_counter() - began
        self.calls += 1
        self.items += len(clips)
        self.max_items = max(self.max_items, len(clips))
        return texts

    def _partial_due(self, state: Transcribing) -> bool:
        return (
            self.partial_samples > 0
            and not state.oneshot
            and state.samples >= state.next_partial
            and state.samples / ASR_RATE < self.asr.windows_s[-1] - 1.5
        )

    def _audio(self, state: Transcribing) -> np.ndarray:
        if not state.chunks:
            return np.zeros(0, np.float32)
        if len(state.chunks) > 1:
            state.chunks = [np.concatenate(state.chunks)]
        return state.chunks[0]

    def _restart(self, state: Transcribing, utterance: int) -> None:
        state.chunks, state.samples = [], 0
        state.utterance = utterance
        state.next_partial = int(MIN_PARTIAL_S * ASR_RATE)


def whisper_stage(spec: StageSpec, settings: Settings) -> StreamingScheduler[Transcribing]:
    asr = WhisperAsr(sample_rate=ASR_RATE, threads=settings.asr_threads or spec.threads)
    handler = WhisperSlots(asr, settings.asr_partial_ms, spec.batch if spec.batch > 1 else spec.slots)
    return StreamingScheduler(handler, spec.slots, info={"model": "whisper", "sample_rate": ASR_RATE})
