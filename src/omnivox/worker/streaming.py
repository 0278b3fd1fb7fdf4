"""Worker side of turn-based streaming: prefill -> generate -> done, on the engine's held conversation.

The worker decides what its cache can serve: a turn's first ``prefill`` carries the whole
conversation; if everything before its last message is what the engine holds (the gateway routed the
turn here for that), only the last message is computed (a cache hit), else the cache is cleared and
everything is prefilled. ``generate`` runs as the ``generate`` work unit, so ``stop`` (or the
connection ending) reaches the engine within one chunk. Behind a gateway the turn ends with an
internal ``turn_end`` frame carrying the hash of what the cache now holds (sent just before the
turn's last message, so the gateway stops forwarding the client's messages to this connection before
the client can have heard the turn is over), then the worker closes the turn's connection. The
figures of the turn go in an internal ``metrics`` frame.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from omnivox.audio.pcm import pcm16_to_b64
from omnivox.core.errors import GenerationInProgress, OmnivoxError, PrefillRequired, as_omnivox_error
from omnivox.engines.base import OUTPUT_SAMPLE_RATE, GenerateParams, GenResult, PrefillStats
from omnivox.protocol import streaming as sp
from omnivox.protocol.chat import ImagePart, history_hash
from omnivox.protocol.control.internal import Metrics, TurnEndReport
from omnivox.video.frames import check_image_b64
from omnivox.worker.handler import SessionHandler

log = logging.getLogger(__name__)


class StreamingHandler(SessionHandler):
    protocol = sp.STREAMING

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_turn = False  # a prefill began a turn that has not ended yet
        self.hit = False  # the turn's first prefill reused the cache
        self.prefilled = False  # a prefill since the last generate
        self.stop = threading.Event()
        self._input = PrefillStats(0, 0, 0, 0)

    async def on_frame(self, raw: str | bytes) -> None:
        msg = sp.STREAMING.parser(raw, self.settings.max_message_bytes)
        generating = self.conn.units.running("generate")
        if isinstance(msg, sp.Prefill):
            if generating:
                raise GenerationInProgress("a generation is running; stop it or wait for done")
            await self.prefill(msg)
        elif isinstance(msg, sp.Generate):
            if generating:
                raise GenerationInProgress("a generation is already running")
            if not self.prefilled:
                raise PrefillRequired("send prefill before generate")
            self.prefilled = False
            self.stop = threading.Event()
            await self.conn.units.start("generate", self.generate(msg))
        elif isinstance(msg, sp.Stop):
            self.stop.set()
        elif isinstance(msg, sp.Close):
            self.conn.end()

    def check_images(self, msg: sp.Prefill) -> None:
        """Images are PNG or JPEG of bounded size (read from their headers, not decoded)."""
        for message in msg.messages:
            if not isinstance(message.content, str):
                for part in message.content:
                    if isinstance(part, ImagePart):
                        check_image_b64(part.data, self.settings.max_image_pixels)

    async def prefill(self, msg: sp.Prefill) -> None:
        first = not self.in_turn
        messages, clear = msg.messages, False
        if first:
            held = self.host.held_messages()
            self.hit = bool(held) and history_hash(held) == history_hash(msg.messages[:-1])
            messages, clear = (msg.messages[-1:], False) if self.hit else (msg.messages, True)
            self.in_turn = True
        try:
            self.check_images(msg)
            stats = await self.host.prefill(messages, clear=clear)
        except OmnivoxError as err:
            if not first:
                raise
            # the turn never began: say why, then that it is over (the cache is as it was)
            self.in_turn = False
            self.end_turn()
            self.conn.error(err)
            self.close_turn()
            return
        self.prefilled = True
        if first:
            self.internal(Metrics(cache_hit=self.hit))
        self.conn.send(
            sp.PrefillDone(
                prompt_length=stats.prompt_length,
                message_count=stats.message_count,
                cached_tokens=stats.cached_tokens,
                input_tokens=stats.input_tokens,
                cache_hit=self.hit,
                worker_id=self.info.worker_id,
                transcript=" ".join(t for t in stats.transcripts if t) if stats.transcripts else None,
            ).model_dump_json(exclude_none=True)
        )
        self._input = stats

    async def generate(self, msg: sp.Generate) -> None:
        params = GenerateParams(
            max_new_tokens=min(msg.max_new_tokens, self.settings.max_new_tokens_limit),
            temperature=msg.temperature,
            generate_audio=msg.generate_audio,
            voice=msg.voice,
        )
        result = GenResult()
        start = time.monotonic()
        ttft: float | None = None
        index = 0
        failure: OmnivoxError | None = None
        try:
            async for chunk in self.host.generate(params, self.stop, result):
                if ttft is None:
                    ttft = time.monotonic() - start
                out = sp.ReplyChunk(chunk_index=index, text_delta=chunk.text_delta)
                if chunk.audio is not None and len(chunk.audio):
                    out.audio_data = pcm16_to_b64(chunk.audio)
                    out.audio_sample_rate = OUTPUT_SAMPLE_RATE
                await self.conn.send_wait(out.model_dump_json(exclude_none=True))
                index += 1
        except Exception as exc:  # an engine fault is reported, the worker keeps serving
            failure = as_omnivox_error(exc)
            if not isinstance(exc, OmnivoxError):
                log.exception("generation failed")
            self.conn.error(failure, keep_open=True)
        # done always ends a generation (after an error too), so the turn ends on both sides
        self.conn.send(sp.ReplyChunk(chunk_index=index, is_final=True).model_dump_json(exclude_none=True))
        stats = self._input
        done = sp.Done(
            elapsed_ms=round((time.monotonic() - start) * 1000, 3),
            stopped=result.stopped or failure is not None,
            error=failure.code if failure is not None else None,
            text=result.text,
            ttft_ms=round(ttft * 1000, 3) if ttft is not None else None,
            history_hash=history_hash(self.host.held_messages()),
            token_stats=sp.TokenStats(
                cached_tokens=stats.cached_tokens,
                input_tokens=stats.input_tokens,
                generated_tokens=result.generated_tokens,
                total_tokens=self.host.kv_length,
            ),
        )
        self.internal(Metrics(turn_done=True, ttft_s=ttft, ttft_cache="hit" if self.hit else "miss"))
        self.in_turn = False
        self.end_turn()
        self.conn.send(done.model_dump_json(exclude_none=True))
        self.close_turn()

    def end_turn(self) -> None:
        """Tell the gateway the turn is over (before the client can hear it is)."""
        self.internal(TurnEndReport(cached_hash=history_hash(self.host.held_messages())))

    def close_turn(self) -> None:
        """Behind a gateway a connection serves one turn; a direct client keeps its connection."""
        if self.info.behind_gateway:
            self.conn.end()

    async def close(self) -> None:
        self.stop.set()  # the generate unit was cancelled with the connection; the engine stops too
