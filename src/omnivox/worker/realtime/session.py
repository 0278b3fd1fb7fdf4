"""One realtime session on a worker: the OpenAI Realtime protocol, adapted onto the voice agent.

The session is a protocol handler on the connection runtime (``connection.runtime``): client events
arrive through ``on_frame``, its events leave through the connection's outbox, work units are the
connection's. It only translates:

- client events -> agent commands (``agent.loop.VoiceAgent``): audio appends, commits and clears,
  ``session.update`` (as ``AgentSettings``), ``response.create`` / ``.cancel``, truncations,
  ``output_audio_buffer.clear``, the client's playback reports
  (``omnivox.output_audio_buffer.report``, which WebRTC and phone calls send for their callers); and
  the conversation's own events (``Conversation``: items the client creates, retrieves, deletes);
- agent events -> OpenAI events and items: what was heard (``input_audio_buffer.*``, transcription
  deltas), the user's turn (a committed item), each reply (``Responses`` plans it and words it as
  ``response.*``), the idle timeout, failures; and each reply's figures to the gateway.

The agent owns hearing, turn-taking, interruption, the playout ledger and the replies, and its own
input and output threads; the event loop never blocks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Coroutine
from typing import Any

from omnivox.agent.events import (
    AgentEvent,
    Failure,
    HearingEvent,
    IdleTimeout,
    InputCleared,
    ReplyReport,
    SpeechJudged,
    SpeechStarted,
    SpeechStopped,
    TranscriptDelta,
    UserTurn,
)
from omnivox.agent.hearing import Denoise, Echo
from omnivox.agent.interruption import InterruptionPolicy, Line
from omnivox.agent.loop import AgentSettings, VoiceAgent
from omnivox.agent.pacing import LeadPacing
from omnivox.agent.turns import TurnSettings
from omnivox.audio.clips import decode_clip_at
from omnivox.core.errors import InvalidMessage, OmnivoxError, WorkerUnavailable
from omnivox.core.ids import new_id
from omnivox.protocol.realtime import events as ev
from omnivox.protocol.realtime import wire as rt
from omnivox.protocol.realtime.session_config import (
    G711_FORMATS,
    OmnivoxOptions,
    SessionConfig,
    TurnDetection,
    apply_update,
    check_tools,
)
from omnivox.protocol.wire import Msg
from omnivox.voice.stack import ASR_RATE
from omnivox.voice.tool_rounds import ServerToolVoice
from omnivox.voice.vad.turn import TurnParams
from omnivox.worker.handler import SessionHandler
from omnivox.worker.realtime.async_outputs import AsyncOutputs
from omnivox.worker.realtime.audio_io import InputDecoder, OutputEncoder
from omnivox.worker.realtime.conversation import Conversation, Item, item_id, item_images, item_text
from omnivox.worker.realtime.events import Events
from omnivox.worker.realtime.mcp import SessionMcp
from omnivox.worker.realtime.responses import Responses
from omnivox.worker.realtime.warnings import SettingWarnings, own_recogniser
from omnivox.worker.reply_metrics import reply_metrics, stages_ms

log = logging.getLogger(__name__)


def turn_params(vad: TurnDetection | None) -> TurnParams | None:
    if vad is None:
        return None
    return TurnParams(
        threshold=vad.threshold,
        prefix_padding_ms=vad.prefix_padding_ms,
        silence_duration_ms=vad.silence_duration_ms,
        # semantic_vad: an end-of-turn model sets each pause's length (silence_duration_ms is unused)
        eagerness=(vad.eagerness or "auto") if vad.type == "semantic_vad" else None,
    )


def turn_settings(vad: TurnDetection | None) -> TurnSettings | None:
    params = turn_params(vad)
    if vad is None or params is None:
        return None
    return TurnSettings(params, vad.create_response, vad.interrupt_response, vad.idle_timeout_ms)


def interruption_policy(options: OmnivoxOptions, input_format: str = "audio/pcm") -> InterruptionPolicy:
    """The judge's policy; the line is the session's ``line``, else a G.711 input's (phone)."""
    line = options.line or ("phone" if input_format in G711_FORMATS else "wideband")
    return InterruptionPolicy(
        resume_ms=options.false_interruption_ms,
        backchannels=tuple(options.backchannels),
        backchannel_max_ms=options.backchannel_max_ms,
        echo_words=options.echo_guard,
        line=Line(line),
    )


def agent_settings(config: SessionConfig) -> AgentSettings:
    """The session's settings as the agent takes them."""
    options = config.omnivox
    return AgentSettings(
        turns=turn_settings(config.audio.input.turn_detection),
        interruption=interruption_policy(options, config.audio.input.format.type),
        echo=Echo(options.echo_canceller, options.echo_gate_factor),
        noise=Denoise(noise.type if (noise := config.audio.input.noise_reduction) is not None else None),
        transcribe=config.audio.input.transcription is not None,
        answer=not config.transcription_only,
    )


def hearing_event(event: HearingEvent) -> Msg:
    """What the agent heard, as the OpenAI event that says it."""
    if isinstance(event, SpeechStarted):
        return ev.SpeechStarted(audio_start_ms=int(event.audio_ms), item_id=event.turn_id)
    if isinstance(event, SpeechStopped):
        return ev.SpeechStopped(audio_end_ms=int(event.audio_ms), item_id=event.turn_id)
    if isinstance(event, TranscriptDelta):
        return ev.TranscriptionDelta(item_id=event.turn_id, delta=event.text)
    if isinstance(event, SpeechJudged):
        return ev.InterruptionJudged(
            verdict=event.verdict, action=event.action, text=event.text, evidence=event.evidence
        )
    assert isinstance(event, InputCleared)
    return ev.Cleared()


class RealtimeSession(SessionHandler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        engine = self.host.engine
        voice = engine.voice
        if voice is None:
            raise WorkerUnavailable(f"engine {engine.name} has no voice models for voice sessions")
        self.profile = voice.profile()
        self.config = SessionConfig(instructions=self.profile.system_prompt)
        if self.info.query.get("intent") == "transcription":
            self.config.type = "transcription"
        self.config.audio.output.voice = self.profile.default_voice
        self.warnings = SettingWarnings(self.profile)
        settings = self.settings
        self.config.omnivox = OmnivoxOptions(
            echo_guard=settings.echo_guard,
            echo_canceller=settings.echo_canceller,
            echo_gate_factor=settings.echo_gate_factor,
            false_interruption_ms=settings.false_interruption_ms,
            backchannels=[b.strip() for b in settings.backchannels.split(",") if b.strip()],
            backchannel_max_ms=settings.backchannel_max_ms,
        )
        self.events = Events(
            self.conn,
            beta=self.info.query.get("beta") in ("1", "true"),
            extensions=self.info.behind_gateway or rt.wants_extensions(self.info.query),
        )
        self.conversation = Conversation(self.events.put)
        self.conversation.transcribing = self.config.audio.input.transcription is not None
        self.decoder = InputDecoder(self.config.audio.input.format, ASR_RATE)
        self.encoder = OutputEncoder(self.config.audio.output.format)
        self.mcp = SessionMcp(
            self.conversation,
            self.events.put,
            self.conn.units,
            allow_private=settings.mcp_allow_private,
            timeout_s=settings.mcp_timeout_s,
        )
        self.responses = Responses(
            profile=self.profile,
            events=self.events,
            conversation=self.conversation,
            config=lambda: self.config,
            encoder=lambda: self.encoder,
            apology=settings.failure_apology,
            mcp=self.mcp,
        )
        self.agent = VoiceAgent(
            ServerToolVoice(voice),  # its replies run the MCP tools they call
            emit=self._on_agent_event,
            plan=lambda extra: self.responses.plan(None, extra),
            prompt=self.responses.prompt,
            units=self.conn.units,
            pacing=LeadPacing(float(settings.audio_lead_ms)),
            settings=agent_settings(self.config),
            confirm_ms=settings.barge_in_min_ms,
            turn_ids=item_id,  # a user turn is the conversation item it becomes
            drop_unsent=self.events.drop_audio,
            # every realtime player (a browser's, a WebRTC call's track, a carrier's) plays audio as
            # it comes and waits when it runs dry: a reply whose speech is made slower than real time
            # plays that much later than its first audio plus its length
            waits_for_audio=True,
        )
        # outputs of calls the reply did not wait for start responses of their own
        self.async_outputs = AsyncOutputs(self.agent, self.conn.units, lambda: self.responses.plan(None, []))
        self.responses.async_outputs = self.async_outputs
        self.events.put(ev.SessionCreated(session=self.config.wire()))

    def main(self) -> Coroutine[Any, Any, None]:
        return self.agent.run()

    async def close(self) -> None:
        await self.agent.close()  # its threads finish their step before the worker resets the models
        await self.mcp.close()  # (after the reply threads: none is mid-call on a connection)

    # ---- client events -> agent commands

    async def on_frame(self, raw: str | bytes) -> None:
        arrival = time.monotonic()
        event = rt.REALTIME.parser(raw, self.settings.max_message_bytes)
        try:
            await self._dispatch(event, arrival)
        except OmnivoxError as err:
            if event.event_id:
                err.details.setdefault("event_id", event.event_id)
            raise

    async def _dispatch(self, event: Any, arrival: float) -> None:
        agent = self.agent
        if isinstance(event, rt.InputAudioBufferAppend):
            agent.feed(self.decoder.decode(event.audio), arrival)
        elif isinstance(event, rt.SessionUpdate):
            await self._update_session(event.session)
        elif isinstance(event, rt.InputAudioBufferCommit):
            agent.commit(event.event_id)
        elif isinstance(event, rt.InputAudioBufferClear):
            agent.clear(event.event_id)
        elif isinstance(event, rt.ResponseCreate):
            await self._respond(event.response)
        elif isinstance(event, rt.ResponseCancel):
            agent.cancel(event.response_id)
        elif isinstance(event, rt.OutputAudioBufferClear):
            if (stopped := agent.stop_speaking()) is not None:
                self.events.put(ev.OutputAudioCleared(response_id=stopped))
        elif isinstance(event, rt.OutputAudioBufferReport):
            if event.state == "queued":
                agent.reports_playback()
            else:
                agent.played(event.response_id, event.state == "started", arrival)
        elif isinstance(event, rt.ConversationItemCreate):
            await self._create_item(event)
        elif isinstance(event, rt.ConversationItemRetrieve):
            self.conversation.retrieve(event.item_id)
        elif isinstance(event, rt.ConversationItemTruncate):
            item, heard_ms = self.conversation.check_truncation(event.item_id, event.audio_end_ms)
            # a reply still being said ends with the truncation; otherwise the item is cut here
            if item.playback is None or not agent.truncate(item.playback, heard_ms):
                self.conversation.truncate(item, heard_ms)
        elif isinstance(event, rt.ConversationItemDelete):
            self.conversation.delete(event.item_id)

    async def _update_session(self, patch: dict[str, Any]) -> None:
        new = apply_update(self.config, patch)
        new.audio.output.voice = self.profile.resolve_voice(new.audio.output.voice)
        await self.mcp.check(new.tools, "session.tools")
        old, self.config = self.config, new
        if new.audio.input.format != old.audio.input.format:
            self.decoder = InputDecoder(new.audio.input.format, ASR_RATE)
        if new.audio.output.format != old.audio.output.format:
            self.encoder = OutputEncoder(new.audio.output.format)
        self.conversation.transcribing = new.audio.input.transcription is not None
        warnings = self.warnings.check(patch, new)
        if (asr := new.audio.input.transcription) is not None and not own_recogniser(asr.model):
            asr.model = "default"  # what transcribes (the warning said which was asked for)
        self.events.put(ev.SessionUpdated(session=new.wire()))
        for warning in warnings:
            log.info("session %s: %s (%s)", self.info.session_id or "-", warning.message, warning.param)
            self.events.put(warning)  # only to clients that asked for omnivox's events
        await self.agent.configure(agent_settings(new))
        await self.mcp.configure(new.tools)

    async def _respond(self, params: rt.ResponseParams | None) -> None:
        if self.config.transcription_only:
            raise InvalidMessage("a transcription session makes no responses", param="session.type")
        if params is not None and params.tools is not None:  # its own MCP servers: listed before it
            tools, _, _ = check_tools(self.config, params.tools, None, None)
            await self.mcp.check(tools, "response.tools")
            await self.mcp.configure(tools, wait=True)
        await self.agent.respond(lambda: self.responses.plan(params, []))

    async def _create_item(self, event: rt.ConversationItemCreate) -> None:
        spec = event.item
        if spec.type == "mcp_approval_response":
            if spec.approval_request_id is None or spec.approve is None:
                missing = "approval_request_id" if spec.approval_request_id is None else "approve"
                raise InvalidMessage(f"an mcp_approval_response needs {missing}", param=f"item.{missing}")
            request = self.conversation.approval_request(spec.approval_request_id)
            item = Item(
                "user",
                False,
                type="mcp_approval_response",
                approval_request_id=spec.approval_request_id,
                approve=spec.approve,
                reason=spec.reason,
                id=spec.id or "",
            )
            self.conversation.create(item, event.previous_item_id)
            self.mcp.answer(request, spec.approve)
            return
        if spec.type == "function_call_output":
            if spec.call_id is None or spec.output is None:
                missing = "call_id" if spec.call_id is None else "output"
                raise InvalidMessage(f"a function_call_output needs {missing}", param=f"item.{missing}")
            call = self.conversation.check_output(spec.call_id)
            item = Item.call_output(spec.call_id, spec.output, id=spec.id or "")
            self.conversation.create(item, event.previous_item_id)
            if call.run_async:
                await self.async_outputs.arrived(call.call_id)
            return
        if spec.type == "function_call":
            if not spec.name:
                raise InvalidMessage("a function_call needs a name", param="item.name")
            call_id = spec.call_id or new_id("call")
            if self.conversation.call_named(call_id) is not None:
                raise InvalidMessage(f"call {call_id!r} already exists", param="item.call_id")
            item = Item.call(call_id, spec.name, spec.arguments or "", id=spec.id or "")
            self.conversation.create(item, event.previous_item_id)
            return
        if spec.role is None:
            raise InvalidMessage("a message needs a role", param="item.role")
        spoken = any(c.type in ("input_audio", "output_audio", "audio") for c in spec.content)
        images = item_images(spec) or None
        item = Item(role=spec.role, audio=spoken, text=item_text(spec), id=spec.id or "", images=images)
        if spec.role == "user" and any(
            c.type == "input_audio" and c.audio and c.transcript is None for c in spec.content
        ):
            item.text = await self._transcribe_item(spec)
        self.conversation.create(item, event.previous_item_id)
        if images and (warning := self.warnings.unseen_images()) is not None:
            log.info("session %s: %s", self.info.session_id or "-", warning.message)
            self.events.put(warning)

    async def _transcribe_item(self, spec: rt.ItemIn) -> str:
        fmt = self.config.audio.input.format
        if fmt.type != "audio/pcm":
            raise InvalidMessage("audio items must be audio/pcm", param="item.content")
        texts = [c.text or "" for c in spec.content if c.type == "input_text"]
        for part in spec.content:
            if part.type == "input_audio" and part.audio:
                audio = decode_clip_at(part.audio, "pcm16", fmt.rate, ASR_RATE)
                try:
                    texts.append(await self.agent.transcribe(audio))
                except RuntimeError:
                    raise InvalidMessage(
                        "cannot transcribe an audio item while the user is speaking", param="item.content"
                    ) from None
        return " ".join(t for t in texts if t)

    # ---- agent events -> OpenAI events and items

    def _on_agent_event(self, event: AgentEvent) -> None:
        if isinstance(event, SpeechStarted | SpeechStopped | TranscriptDelta | InputCleared | SpeechJudged):
            self.events.put(hearing_event(event))
        elif isinstance(event, UserTurn):
            self.conversation.commit_user_turn(event.turn_id, event.text)
        elif isinstance(event, ReplyReport):
            self._report(event)
        elif isinstance(event, IdleTimeout):
            self.events.put(
                ev.TimeoutTriggered(
                    audio_start_ms=int(event.audio_start_ms),
                    audio_end_ms=int(event.audio_end_ms),
                    item_id=item_id(),
                )
            )
        elif isinstance(event, Failure):
            self.conn.error(event.error, event.tag, keep_open=True)
        else:
            self.responses.on_event(event)

    def _report(self, report: ReplyReport) -> None:
        """A heard reply's figures, for the gateway. A failed reply is told in its response.done
        alone (stock clients take an error event as the session's end); the gateway counts it."""
        stages = stages_ms(report)
        if stages:
            self.events.put(ev.TurnBreakdownReport(response_id=report.reply_id, stages_ms=stages))
        self.internal(reply_metrics(report))
