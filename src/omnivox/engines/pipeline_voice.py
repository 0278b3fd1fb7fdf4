"""The voice models of a pipeline worker: proxies that do their work on the pipeline's stages.

- ``RemoteAsr``: a ``StreamingAsr`` whose audio goes to the ASR stage. The session's hearing is one
  request that holds an ASR slot from ``open_stream`` (the session's start) to ``reset`` (its end);
  utterances are flushed inside it. A whole clip is a one-shot request (no slot).
- ``pipeline_reply``: ``voice.reply``'s producer done by the stages: the reply enters at the LLM,
  whose words stream to the TTS and back here while the TTS streams each sentence's audio back, as
  typed chunks in ``voice.reply``'s shapes (``pipeline.models.voice_chunks``).
  ``stop`` (a barge-in) aborts the request in every stage at once.
- ``RemoteLlm`` and ``RemoteTts``: the stages as a ``ChatLlm`` and a ``StreamingTts`` on their own.

A stage that is lost mid-session is one recoverable error (``stage_lost``), raised once: the hearing
goes deaf (audio dropped, no transcripts) and reopens itself once the stage is back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np

from omnivox.core.errors import OmnivoxError, StageLost
from omnivox.core.tracing import traceparent
from omnivox.pipeline.client import PipelineClient, Request
from omnivox.pipeline.models.voice_chunks import (
    ClipTranscript,
    FinalTranscript,
    FirstTokenChunk,
    PartialTranscript,
    ReplyPrompt,
    SpeakText,
    SpokenChunk,
    TranscribeClip,
    TranscribeStream,
    UtteranceAudio,
    UtteranceDrop,
    UtteranceEnd,
    WordChunk,
    asr_output,
    reply_output,
    reply_piece,
    to_values,
)
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.asr.base import Hypothesis, StreamingAsr, Transcript
from omnivox.voice.llm.base import ChatLlm, LlmParams
from omnivox.voice.reply import FirstToken, ReplyPiece, ReplyRequest, Word
from omnivox.voice.tts.base import StreamingTts

RETRY_S = 1.0  # a deaf hearing tries to reopen at most this often
FINAL_TIMEOUT_S = 30.0
# audio goes to the ASR stage in pieces of at least this much (40 ms appends are sent three at a
# time): a third of the messages, ~5% less of a light worker's CPU at 8 sessions (docs/benchmarks.md);
# a flush sends what is held first, so a final transcript waits for nothing, a partial at most 80 ms
STREAM_MS = 120
# a prefill runs on the session's output thread, ahead of its reply: one still waiting behind other
# sessions' replies in the LLM stage after this long is given up (the reply computes it all)
PREFILL_WAIT_S = 1.0


class RemoteAsr(StreamingAsr):
    streaming = True

    def __init__(self, client: PipelineClient, sample_rate: int = 16000, stage: str = "asr") -> None:
        super().__init__()
        self.client = client
        self.sample_rate = sample_rate
        self.stage = stage
        self._request: Request | None = None
        self._utterance = 0
        self._partial: str | None = None  # newest partial of the current utterance not yet reported
        self._finals: dict[int, str] = {}
        self._deaf_until = 0.0  # after a failure: drop audio until then, then try to reopen
        self._held: list[np.ndarray] = []  # audio not yet sent (less than STREAM_MS of it)
        self._held_samples = 0
        self._piece_samples = int(STREAM_MS * sample_rate / 1000)
        self._trace: str | None = None  # the session's trace, taken when its stream first opens

    def open_stream(self) -> None:
        """Take an ASR slot for this session (waits in the stage if all are taken)."""
        if self._request is None or self._request.finished:
            hearing = to_values(TranscribeStream())
            self._trace = self._trace or traceparent()  # (a reopening runs outside the session's context)
            self._request = self.client.submit(
                hearing, entries=[self.stage], exits=[self.stage], traceparent=self._trace
            )
            self._finals.clear()

    # ---- StreamingAsr hooks

    def _process(self, audio: np.ndarray) -> Hypothesis | None:
        request = self._live()
        if request is None:
            return None
        self._held.append(np.array(audio, np.float32))  # a copy: the caller may reuse its buffer
        self._held_samples += len(audio)
        if self._held_samples >= self._piece_samples:
            self._send_held(request)
        self._poll(request, None)
        partial, self._partial = self._partial, None
        return (partial, ()) if partial else None

    def _end(self) -> Hypothesis:
        request = self._live()
        n = self._utterance
        self._utterance += 1
        if request is None:
            return ("", ())
        self._send_held(request)
        request.stream(to_values(UtteranceEnd(n)))
        text = self._poll(request, n)
        return (text or "", ())

    def _abandon(self) -> None:
        request = self._live()
        self._utterance += 1
        self._drop_held()
        if request is not None:
            request.stream(to_values(UtteranceDrop()))

    def _reset_session(self) -> None:
        request, self._request = self._request, None
        if request is not None:
            request.close()  # the stage frees the slot
        self._utterance, self._partial, self._deaf_until = 0, None, 0.0
        self._trace = None
        self._finals.clear()
        self._drop_held()

    def transcribe(self, audio: np.ndarray, frame_ms: float = 20.0) -> Transcript:
        """A whole clip: one request, no slot."""
        clip = to_values(TranscribeClip(np.ascontiguousarray(audio, np.float32)))
        request = self.client.submit(
            clip, entries=[self.stage], exits=[self.stage], traceparent=traceparent()
        )
        text = ""
        for event in request.events():
            if event.kind == "result":
                result = asr_output(event.values)
                text = result.text if isinstance(result, ClipTranscript) else ""
        return Transcript(text, (), True, self.audio_ms)

    # ---- internals

    def _send_held(self, request: Request) -> None:
        if self._held:
            audio = self._held[0] if len(self._held) == 1 else np.concatenate(self._held)
            self._drop_held()
            request.stream(to_values(UtteranceAudio(np.ascontiguousarray(audio, np.float32))))

    def _drop_held(self) -> None:
        self._held, self._held_samples = [], 0

    def _live(self) -> Request | None:
        """The hearing request, reopened after a failure once the retry time has come."""
        if self._request is not None and not self._request.finished:
            return self._request
        if time.monotonic() < self._deaf_until:
            return None
        try:
            self._request = None
            self.open_stream()
        except OmnivoxError:
            self._deaf_until = time.monotonic() + RETRY_S
            return None
        return self._request

    def _poll(self, request: Request, want: int | None) -> str | None:
        """Take what came back; with ``want``, wait for that utterance's final transcript."""
        deadline = time.monotonic() + FINAL_TIMEOUT_S
        while True:
            if want is not None and want in self._finals:
                return self._finals.pop(want)
            try:
                event = request.next(0.0 if want is None else 0.05)
            except OmnivoxError:
                self._request = None
                self._deaf_until = time.monotonic() + RETRY_S
                raise
            if event is not None:
                heard = asr_output(event.values)
                if isinstance(heard, FinalTranscript):
                    self._finals[heard.utterance] = heard.text
                elif isinstance(heard, PartialTranscript) and heard.utterance == self._utterance:
                    self._partial = heard.text
                continue
            if want is None:
                return None
            if time.monotonic() > deadline:
                raise StageLost(f"the {self.stage} stage sent no transcript in {FINAL_TIMEOUT_S:.0f} s")


def pipeline_reply(
    client: PipelineClient, request: ReplyRequest, stop: threading.Event, session: str | None = None
) -> Iterator[ReplyPiece]:
    """``voice.reply.produce_reply`` through the stages (see the module doc). ``session`` names the
    conversation, so the LLM stage computes it in the KV slot that already holds it."""
    prompt = ReplyPrompt(
        messages=[m.model_dump(mode="json") for m in request.messages],
        temperature=request.llm.temperature,
        max_tokens=request.llm.max_tokens,
        session=session,
        voice=request.voice,
        speed=request.speed,
    )
    began = time.monotonic()
    exits = ["llm", "tts"] if request.speak else ["llm"]
    pending = client.submit(to_values(prompt), entries=["llm"], exits=exits, traceparent=request.traceparent)
    first = True
    try:
        for event in pending.events(stop):
            if event.kind != "stream" or stop.is_set():
                continue
            chunk = reply_output(event.values)
            if first and isinstance(chunk, FirstTokenChunk | WordChunk):
                yield FirstToken(time.monotonic() - began)  # as the caller waited for it
                first = False
            if isinstance(chunk, WordChunk | SpokenChunk):
                yield reply_piece(chunk)
    finally:
        if not pending.finished:
            pending.abort("stopped")


def pipeline_prefill(client: PipelineClient, request: ReplyRequest, session: str) -> None:
    """Have the LLM stage compute ``request``'s prompt (the user's words so far) into the KV slot
    of ``session``'s conversation, so its reply computes only what came after (``VoiceModels.prefill``
    through the stages); returns once the stage has, or after ``PREFILL_WAIT_S`` (given up)."""
    prompt = ReplyPrompt(
        messages=[m.model_dump(mode="json") for m in request.messages], session=session, prefill=True
    )
    pending = client.submit(
        to_values(prompt), entries=["llm"], exits=["llm"], traceparent=request.traceparent
    )
    deadline = time.monotonic() + PREFILL_WAIT_S
    while not pending.finished and (left := deadline - time.monotonic()) > 0:
        pending.next(left)
    if not pending.finished:
        pending.abort("prefill waited too long")


class RemoteLlm(ChatLlm):
    def __init__(self, client: PipelineClient, vision: bool = False) -> None:
        self.client = client
        self.name = "pipeline:llm"
        self.vision = vision

    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: LlmParams | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[str]:
        p = params or LlmParams()
        request = ReplyRequest(list(messages), p, speak=False)
        for piece in pipeline_reply(self.client, request, stop or threading.Event()):
            if isinstance(piece, Word):
                yield piece.text


class RemoteTts(StreamingTts):
    def __init__(self, client: PipelineClient, voices: tuple[str, ...], default_voice: str) -> None:
        self.client = client
        self._voices = voices or (default_voice,)
        self.default_voice = default_voice

    @property
    def voices(self) -> tuple[str, ...]:
        return self._voices

    def _synthesize(self, text: str, voice: str, stop: threading.Event, speed: float) -> Iterator[np.ndarray]:
        values = to_values(SpeakText(text, voice, speed))
        request = self.client.submit(values, entries=["tts"], exits=["tts"])
        try:
            for event in request.events(stop):
                if event.kind != "stream":
                    continue
                chunk = reply_output(event.values)
                if isinstance(chunk, SpokenChunk):
                    yield np.asarray(chunk.audio, np.float32)
        finally:
            if not request.finished:
                request.abort("stopped")
