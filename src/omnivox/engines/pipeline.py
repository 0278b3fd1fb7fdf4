"""The ``pipeline`` engine: the cascade with its models on a staged pipeline's shared stages.

A worker hosting it is a light session host: it keeps the cheap per-session models (silero VAD, the
smart-turn end-of-turn model) and reaches the heavy ones through the coordinator (``coordinator``
setting): its hearing holds one ASR slot for the session's life, each reply goes LLM -> TTS through
the stages, a streaming turn's audio parts are one-shot ASR requests. Many workers share one set of
batched models. Its roles are the cascade's over these proxies: ``voice`` is ``PipelineVoice``
(``VoiceModels`` on the stages), ``chat`` the cascade's ``CascadeChat`` over it.

A worker process with several seats (``--seats N``) builds one engine per seat over one
``PipelineLink``: the seats share the client (one socket, one IO thread) and the smart-turn model,
and each has its own VAD detector (its recurrent state is the session's; the Silero model under it
is the process's, its windows batched with the other seats': ``voice.vad.batch``), ASR stream and
LLM conversation.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from omnivox.core.config import Settings
from omnivox.core.errors import EngineFailure
from omnivox.engines.cascade import StackEngine
from omnivox.engines.pipeline_voice import RemoteAsr, RemoteLlm, RemoteTts, pipeline_prefill, pipeline_reply
from omnivox.pipeline.client import PipelineClient
from omnivox.pipeline.relay import relay_from
from omnivox.voice.listener import Listener
from omnivox.voice.llm.history import ReplyTemperature
from omnivox.voice.models import VoiceProfile
from omnivox.voice.reply import ReplyPiece, ReplyRequest, with_apology
from omnivox.voice.stack import ASR_RATE, VoiceStack, context_tokens, max_reply_tokens
from omnivox.voice.vad.turn import TurnParams

if TYPE_CHECKING:
    from omnivox.voice.turn.smart_turn import SmartTurn

log = logging.getLogger(__name__)
READY_TIMEOUT_S = 300.0  # the stages load their models (seconds each) while the worker waits


class PipelineVoice:
    """``VoiceModels`` on a staged pipeline: the session's hearing holds an ASR slot, each reply goes
    LLM -> TTS through the stages (``pipeline_reply``)."""

    def __init__(self, stack: VoiceStack, client: PipelineClient, session: str) -> None:
        self.stack = stack  # the local models (VAD, smart-turn) and the stages' proxies
        self.client = client
        self.session = session  # the conversation's name in the LLM stage (its KV slot)

    def profile(self) -> VoiceProfile:
        return self.stack.profile()

    def open_listener(
        self, params: TurnParams | None, confirm_ms: float, speculate_at: float | None = 0.3
    ) -> Listener:
        asr = self.stack.asr
        assert isinstance(asr, RemoteAsr)
        asr.open_stream()  # the session's ASR slot, for its life
        return self.stack.open_listener(params, confirm_ms, speculate_at)

    def reply(self, request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        pieces = pipeline_reply(self.client, request, stop, session=self.session)
        return with_apology(pieces, self.stack.tts, request, stop)

    def prefill(self, request: ReplyRequest) -> None:
        """The LLM stage computes the user's words so far into this session's KV slot (the one its
        replies go back to), so the reply computes only the rest (``pipeline_prefill``)."""
        pipeline_prefill(self.client, request, session=self.session)


class PipelineLink:
    """What the seats of one worker process share of the pipeline, made once by the first seat that
    loads: the client (its requests are independent and its methods safe from any thread: the
    seats' sessions multiplex one socket and one IO thread) and the smart-turn model (an
    onnxruntime session, whose ``run`` may be called from several threads and keeps nothing
    between calls)."""

    def __init__(self, settings: Settings) -> None:
        if not settings.coordinator:
            raise ValueError("the pipeline engine needs --coordinator tcp://HOST:PORT")
        self.settings = settings
        self._lock = threading.Lock()  # seats load in their own engine threads, at once
        self._client: PipelineClient | None = None
        self._turn: SmartTurn | None = None
        self._holders = 0  # engines using this link: the last one to let go closes it

    def hold(self) -> None:
        """An engine uses this link (until it calls ``release``)."""
        with self._lock:
            self._holders += 1

    def connect(self) -> PipelineClient:
        """The client, connected to a pipeline with ASR, LLM and TTS stages running (the first call
        waits for them; a failed one leaves nothing behind, so the next call tries again)."""
        with self._lock:
            if self._client is None:
                self._client = self._connect()
            return self._client

    def _connect(self) -> PipelineClient:
        s = self.settings
        assert s.coordinator is not None
        client = PipelineClient(
            s.coordinator,
            name=f"worker-{os.getpid()}",
            heartbeat_s=s.pipeline_heartbeat_s,
            lost_after_s=max(1.5, 2 * s.pipeline_lost_after_s),
            relay=relay_from(s),
            key=s.key_for("worker"),
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if client.ready.is_set() and {"asr", "llm", "tts"} <= set(client.stages):
                return client
            time.sleep(0.1)
        client.close()
        raise EngineFailure(f"the pipeline at {s.coordinator} has no asr, llm and tts stages running")

    def turn(self) -> SmartTurn:
        from omnivox.voice.turn.smart_turn import SmartTurn  # (onnxruntime: only a loading worker needs it)

        with self._lock:
            if self._turn is None:
                self._turn = SmartTurn()
            return self._turn

    def release(self) -> None:
        """An engine is done with this link; the last one closes the connection to the stages."""
        with self._lock:
            self._holders -= 1
            client, last = self._client, self._holders <= 0
            if last:
                self._client = None
        if last and client is not None:
            client.close()


class PipelineEngine(StackEngine):
    name = "pipeline"

    def __init__(self, settings: Settings, link: PipelineLink | None = None, seat: int | None = None) -> None:
        """``link``: shared with the other seats of this process (``seat``: this one's number);
        without one, the engine has a link of its own."""
        super().__init__()
        self.settings = settings
        self.link = link if link is not None else PipelineLink(settings)
        self.link.hold()
        self._holding = True
        self.seat = seat
        self.client: PipelineClient | None = None

    def load(self) -> None:
        self.client = self.link.connect()
        stack = self._build_stack()
        session = self.client.name if self.seat is None else f"{self.client.name}-seat{self.seat}"
        self._loaded(stack, PipelineVoice(stack, self.client, session))

    def _build_stack(self) -> VoiceStack:
        from omnivox.voice.vad.silero import SileroVad

        client, s = self.client, self.settings
        assert client is not None
        tts = client.stages["tts"].info
        voices = tuple(tts.get("voices") or ())
        default = str(tts.get("default_voice") or (voices[0] if voices else "default"))
        vision = bool(client.stages["llm"].info.get("vision", False))
        llm_settings = s if s.llm != "auto" or s.llm_url else s.model_copy(update={"llm": "local"})
        return VoiceStack(
            vad=SileroVad(ASR_RATE),  # each seat's own state; the model is shared
            asr=RemoteAsr(client, ASR_RATE),
            tts=RemoteTts(client, voices, default),
            llm=RemoteLlm(client, vision),
            turn=self.link.turn(),
            system_prompt=s.system_prompt,
            temperature=ReplyTemperature(s.llm_temperature_first, s.llm_temperature_later),
            context_tokens=context_tokens(llm_settings),
            max_reply_tokens=max_reply_tokens(llm_settings),
        )

    def close(self) -> None:
        super().close()
        if self._holding:  # (once, however often it is closed)
            self._holding = False
            self.link.release()  # the process's last seat to close closes the link
