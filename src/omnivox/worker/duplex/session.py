"""Worker side of a full-duplex session: prepare, the unit loop, pause/resume, stop, cleanup.

The session's phase is an explicit state machine (``Phase``): waiting for ``prepare``, preparing,
active (units run), paused (a watchdog releases the worker if no ``resume`` comes in time), and
stopped. The worker's own state follows (DUPLEX_ACTIVE <-> DUPLEX_PAUSED) and the gateway is told,
so its view of the worker follows too. However the session ends (``stop``, the pause timeout, the
client vanishing, the connection failing), ``close`` cleans its unit source up once,
before the host resets the engine and takes the worker back to IDLE.
"""

from __future__ import annotations

import asyncio
import logging
from enum import StrEnum
from typing import Any

from omnivox.core.errors import AlreadyPrepared, NotPaused, PrepareRequired, SessionPaused
from omnivox.core.transitions import Machine
from omnivox.engines.duplex import DuplexParams, DuplexReady
from omnivox.protocol import duplex as dp
from omnivox.protocol.control.internal import Metrics, PauseReport
from omnivox.protocol.control.workers import WorkerState
from omnivox.worker.duplex.agent_units import AgentUnits
from omnivox.worker.duplex.inputs import Chunk, InputDecoder, InputLimits, decode_ref_audio
from omnivox.worker.duplex.units import ModelUnits, UnitLoop, UnitSettings, UnitSource
from omnivox.worker.handler import SessionHandler
from omnivox.worker.reply_metrics import reply_metrics

log = logging.getLogger(__name__)


class Phase(StrEnum):
    WAITING = "waiting"  # connected; no prepare yet
    PREPARING = "preparing"  # the engine is starting the session
    ACTIVE = "active"  # units run
    PAUSED = "paused"  # no audio taken; the watchdog runs
    STOPPED = "stopped"  # stop, timeout, or the connection ended


P = Phase
PHASES: dict[Phase, frozenset[Phase]] = {
    P.WAITING: frozenset({P.PREPARING, P.STOPPED}),
    P.PREPARING: frozenset({P.ACTIVE, P.WAITING, P.STOPPED}),
    P.ACTIVE: frozenset({P.PAUSED, P.STOPPED}),
    P.PAUSED: frozenset({P.ACTIVE, P.STOPPED}),
    P.STOPPED: frozenset(),
}


class DuplexSession(SessionHandler):
    protocol = dp.DUPLEX

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.phase = Machine(PHASES, Phase.WAITING, "duplex phase")
        self.mode = dp.mode_of(self.info.session_id, self.info.query)
        self.loop: UnitLoop | None = None
        self.source: UnitSource | None = None  # what decides each unit
        self.inputs: InputDecoder | None = None
        self.diagnostics: dict[str, Any] = {}  # the client's last client_diagnostic figures
        self._cleaned = False

    # ---- client messages

    async def on_frame(self, raw: str | bytes) -> None:
        msg = dp.DUPLEX.parser(raw, self.settings.max_message_bytes)
        phase = self.phase.state
        if phase is Phase.STOPPED:
            return  # the session is over; its last words are on their way
        if isinstance(msg, dp.Prepare):
            if phase is not Phase.WAITING:
                raise AlreadyPrepared("the session is already prepared; start a new session to change it")
            await self.prepare(msg)
        elif isinstance(msg, dp.AudioChunk):
            self.check_prepared()
            if phase is Phase.PAUSED:
                raise SessionPaused("the session is paused: send resume before more audio")
            await self.hear(msg)
        elif isinstance(msg, dp.Pause):
            self.check_prepared()
            await self.pause(msg.timeout)
        elif isinstance(msg, dp.Resume):
            self.check_prepared()
            if phase is not Phase.PAUSED:
                raise NotPaused("the session is not paused")
            await self.resume()
        elif isinstance(msg, dp.Stop):
            await self.stop()
        elif isinstance(msg, dp.ClientDiagnostic):
            self.diagnostics = msg.metrics

    def check_prepared(self) -> None:
        if self.phase.state in (Phase.WAITING, Phase.PREPARING):
            raise PrepareRequired("send prepare first")

    async def prepare(self, msg: dp.Prepare) -> None:
        config = msg.config
        rate = config.sample_rate
        params = DuplexParams(
            system_prompt=msg.system_prompt,
            mode=self.mode,
            generate_audio=config.generate_audio,
            chunk_ms=config.chunk_ms,
            max_new_speak_tokens=config.max_new_speak_tokens_per_chunk,
            temperature=config.temperature,
            top_p=config.top_p,
            top_k=config.top_k,
            listen_prob_scale=config.listen_prob_scale,
            max_kv_tokens=config.max_kv_tokens,
            voice=config.voice,
            ref_audio=decode_ref_audio(msg.ref_audio_base64, rate) if msg.ref_audio_base64 else None,
            tts_ref_audio=(
                decode_ref_audio(msg.tts_ref_audio_base64, rate) if msg.tts_ref_audio_base64 else None
            ),
        )
        self.phase.move(Phase.PREPARING)
        self.source = self._source()
        try:
            ready: DuplexReady = await self.source.prepare(params)
        except BaseException:
            if self.phase.state is Phase.PREPARING:
                self.phase.move(Phase.WAITING)
            raise
        if self.phase.state is not Phase.PREPARING:
            return  # stopped meanwhile
        self.phase.move(Phase.ACTIVE)
        see = self.mode == "omni" and ready.vision
        limits = InputLimits(
            self.settings.duplex_max_chunk_ms, self.settings.duplex_max_frames, self.settings.max_image_pixels
        )
        self.inputs = InputDecoder(rate, limits, see_frames=see)
        self.loop = UnitLoop(
            self.source,
            self._send_result,
            lambda err: self.conn.error(err),
            UnitSettings(
                deferred_finalize=msg.deferred_finalize,
                force_listen_count=config.force_listen_count,
                max_lag_ms=self.settings.duplex_max_lag_ms,
                generate_audio=config.generate_audio,
            ),
        )
        warnings = [f"unknown config key {key!r} ignored" for key in config.unknown]
        warnings.extend(ready.notes)
        self.conn.send(
            dp.Prepared(
                session_id=self.info.session_id,
                mode=self.mode,
                config=config.known(),
                deferred_finalize=msg.deferred_finalize,
                vision=see,
                warnings=warnings,
            ).model_dump_json()
        )
        await self.conn.units.start("units", self.loop.run())

    def _source(self) -> UnitSource:
        """A model that decides each unit itself, else the voice agent over the voice models."""
        engine = self.host.engine
        if engine.duplex is None and engine.voice is not None:
            return AgentUnits(
                engine.voice,
                self.conn.units,
                self.settings,
                report=lambda err: self.conn.error(err),
                figures=lambda report: self.internal(reply_metrics(report)),
            )
        return ModelUnits(self.host)

    def _send_result(self, result: dp.Result) -> None:
        self.conn.send(result.model_dump_json(exclude_none=True))
        self.internal(
            Metrics(
                unit_wall_clock_s=result.wall_clock_ms / 1000,
                unit_spoke=not result.is_listen,
                unit_lagging=result.lagging,
            )
        )

    async def hear(self, msg: dp.AudioChunk) -> None:
        assert self.inputs is not None and self.loop is not None
        audio = self.inputs.audio(msg)
        frames: list[Any] = []
        if msg.frame_base64_list and self.mode == "omni":
            # decoding images takes milliseconds: off the event loop (not in the engine's thread)
            frames = await asyncio.to_thread(self.inputs.frames, msg)
        self.loop.push(Chunk(audio=audio, frames=frames, force_listen=msg.force_listen))

    async def pause(self, asked_s: float | None) -> None:
        limit = self.settings.duplex_max_pause_s
        timeout_s = min(asked_s if asked_s is not None else self.settings.duplex_pause_timeout_s, limit)
        if self.phase.state is not Phase.PAUSED:
            self.phase.move(Phase.PAUSED)
            self.host.transition(WorkerState.DUPLEX_PAUSED)
            self.internal(PauseReport(paused=True))
        self.conn.send(dp.Paused(timeout_s=timeout_s).model_dump_json())
        # (re)armed: a second pause restarts the watchdog with its own timeout
        await self.conn.units.start("watchdog", self._watchdog(timeout_s))

    async def _watchdog(self, timeout_s: float) -> None:
        await asyncio.sleep(timeout_s)
        await self.end_with(dp.Timeout(reason="pause_timeout").model_dump_json())

    async def resume(self) -> None:
        await self.conn.units.cancel("watchdog")
        self.phase.move(Phase.ACTIVE)
        self.host.transition(WorkerState.DUPLEX_ACTIVE)
        self.internal(PauseReport(paused=False))
        self.conn.send(dp.Resumed().model_dump_json())

    async def stop(self) -> None:
        units = self.loop.units if self.loop is not None else 0
        await self.end_with(dp.Stopped(session_id=self.info.session_id, units=units).model_dump_json())

    async def end_with(self, last: str) -> None:
        """End the session: the unit loop stops, the engine cleans up, ``last`` is said, then close."""
        if self.phase.state is Phase.STOPPED:
            return
        self.phase.move(Phase.STOPPED)
        await self.conn.units.cancel("units")
        await self.cleanup()
        self.conn.send(last)
        self.conn.end()

    # ---- the end

    async def cleanup(self) -> None:
        if self._cleaned:
            return
        self._cleaned = True
        if self.loop is not None:
            await self.loop.close()
        await (self.source or ModelUnits(self.host)).cleanup()

    async def close(self) -> None:
        if self.phase.state is not Phase.STOPPED:
            self.phase.move(Phase.STOPPED)
        await self.cleanup()
        if self.loop is not None and (self.loop.lagging_units or self.loop.dropped_ms):
            log.info(
                "duplex session %s: %d lagging units, %.0f ms of audio dropped",
                self.info.session_id,
                self.loop.lagging_units,
                self.loop.dropped_ms,
            )
