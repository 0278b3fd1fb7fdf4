"""A phone call as a session's ``Socket``: SIP/RTP or a carrier's media stream, bridged into a
realtime session on a worker through the one client edge (admitted, queued, limited, metered,
recorded), as WebRTC calls are.

The session's frames are routed by the protocol's ``PhoneBridge``: reply audio goes to the call's
playout (``telephony.playout``), which reports what the caller really heard; a reply paused for
speech over it stops playing at once and plays on if it was nothing; a reply cut short is dropped,
and the session is told how much of it the caller heard (a ``conversation.item.truncate``, when
the call heard less than the session assumed). Sidebands (``?call_id=``) hear every event.

    RINGING ──answered──> ACTIVE ──> ENDED
       └────── rejected, cancelled, timed out ──────┘

A call ends when the caller hangs up (BYE, the carrier's stop), the session ends, the agent calls
``end_call`` (once its goodbye has played), nobody speaks for the profile's idle timeout, or the
API hangs it up; ``on_end`` then does what the call's signalling needs (a BYE, closing the stream).

The agent presses keys with ``send_dtmf`` where the call has a ``keypad`` (SIP: RFC 4733 events);
each call's presses are played one after the other and answered with the tool's output.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Any, Protocol

from omnivox.connection.sockets import PeerGone, Socket
from omnivox.core.errors import OmnivoxError
from omnivox.core.ids import new_id
from omnivox.core.transitions import Machine
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.edges.client import serve_session
from omnivox.gateway.edges.sidebands import Sidebands
from omnivox.protocol.phone import PhoneBridge
from omnivox.protocol.spec import WireProtocol, Withheld
from omnivox.telephony.dtmf import DIGITS, InvalidDtmf
from omnivox.telephony.rtp_endpoint import KeysUnavailable

log = logging.getLogger(__name__)

_MAX_INBOUND = 500  # frames waiting for the session (20 s of caller audio); more audio is dropped
HANG_UP_GRACE_S = 15.0  # the longest an end_call waits for its goodbye to play
MAX_KEYS = 32  # keys one send_dtmf call may press


class PhoneState(StrEnum):
    RINGING = "ringing"  # offered; not answered yet
    ACTIVE = "active"  # answered: media flows
    ENDED = "ended"


_S = PhoneState
TRANSITIONS = {
    _S.RINGING: frozenset({_S.ACTIVE, _S.ENDED}),
    _S.ACTIVE: frozenset({_S.ENDED}),
    _S.ENDED: frozenset(),
}


class Playout(Protocol):
    """What a call plays its replies through (``telephony.playout``)."""

    playing: str | None

    @property
    def buffered(self) -> int: ...

    def push(self, response_id: str | None, audio: bytes) -> None: ...
    def audio_over(self, response_id: str) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def clear(self, response_id: str | None = None) -> str | None: ...
    def heard_ms(self, response_id: str) -> float: ...


class PhoneCall:
    """One phone call and the ``Socket`` its session runs on."""

    def __init__(
        self,
        kind: str,
        bridge: PhoneBridge,
        encoding: str,
        *,
        idle_timeout_s: float = 60.0,
        on_end: Callable[[str], None] = lambda reason: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.id = new_id("rtc")
        self.kind = kind  # sip, twilio, telnyx, plivo
        self.bridge = bridge
        self.encoding = encoding
        self.idle_timeout_s = idle_timeout_s
        self.on_end = on_end
        self.clock = clock
        self.machine = Machine(TRANSITIONS, _S.RINGING, "phone call state")
        self.playout: Playout | None = None
        self.sidebands = Sidebands()
        self.end_reason: str | None = None
        self.dropped = False  # Socket: the caller vanished rather than hung up
        self.close_code: int | None = None
        self.info: dict[str, Any] = {}  # what the API shows of it (from, to, headers)
        self.keypad: Callable[[str], Awaitable[None]] | None = None  # presses keys on the line (SIP)
        self._pressing = asyncio.Lock()  # one send_dtmf at a time, in the order asked
        self.heard_at = clock()  # the last sign of life (speech, a key, reply audio)
        self._items: dict[str, str] = {}  # assistant item -> its response
        self._hanging_up = False
        self._inbound: asyncio.Queue[str | None] = asyncio.Queue()
        self._answered = asyncio.Event()
        self._ended = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def state(self) -> PhoneState:
        return self.machine.state

    @property
    def ended(self) -> bool:
        return self.state is _S.ENDED

    def answered(self, playout: Playout) -> None:
        """Media flows: replies play through ``playout``."""
        self.playout = playout
        if self.state is _S.RINGING:
            self.machine.move(_S.ACTIVE)
        self.heard_at = self.clock()
        self._answered.set()

    async def wait_answered(self) -> bool:
        """Until the call is answered (True) or ends ringing (False): a call omnivox places takes
        a worker only once somebody picked up."""
        answered = asyncio.ensure_future(self._answered.wait())
        ended = asyncio.ensure_future(self._ended.wait())
        try:
            await asyncio.wait({answered, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            answered.cancel()
            ended.cancel()
        return self.state is _S.ACTIVE

    def fail(self, err: OmnivoxError) -> None:
        """End a call that never connected, telling its sidebands why (an ``error`` event)."""
        self.sidebands.publish(self.bridge.failure(err))
        self.end(err.message)

    async def run(self, session: Callable[[PhoneCall], Awaitable[None]]) -> None:
        """Serve the call's session (and watch for silence) until the call ends."""
        watchdog = self._spawn(self._watch_idle())
        try:
            await session(self)
        finally:
            watchdog.cancel()
            self.end("the session ended")

    # ---- Socket (what the session reads and writes)

    async def receive(self) -> str | bytes | None:
        return await self._inbound.get()

    async def send(self, frame: str | bytes) -> None:
        if self.ended:
            raise PeerGone(self.end_reason or "the call ended")
        route = self.bridge.route(frame.decode() if isinstance(frame, bytes) else frame)
        playout = self.playout
        if route.item is not None:
            self._items[route.item[1]] = route.item[0]
        if route.truncated is not None and playout is not None:
            self._tell_heard(playout, *route.truncated)
        if playout is not None:
            if route.audio:
                playout.push(route.response_id, route.audio)
                self.heard_at = self.clock()
            if route.pause:
                playout.pause()
            if route.resume:
                playout.resume()
            if route.clear:
                playing = playout.clear(route.response_id)
                if playing is not None and not route.cleared_event:
                    self.sidebands.publish(self.bridge.playback("cleared", playing))
            if route.audio_over and route.response_id is not None:
                playout.audio_over(route.response_id)
        if route.caller_spoke:
            self.heard_at = self.clock()
        if route.event is not None:
            self.sidebands.publish(route.event)
        if route.hang_up:
            self._hanging_up = True
            self._spawn(self._hang_up_after_goodbye())
        if route.keys is not None:
            self._spawn(self._press(*route.keys))

    async def close(self, code: int = 1000) -> None:
        self.close_code = code
        self.end(f"the session closed ({code})")

    # ---- the caller's side

    def caller_audio(self, payload: bytes) -> None:
        if self.state is _S.ACTIVE and self._inbound.qsize() < _MAX_INBOUND:
            self._deliver(self.bridge.audio_in(payload))

    def caller_dtmf(self, digit: str) -> None:
        frames, event = self.bridge.dtmf(digit)
        self.heard_at = self.clock()
        for frame in frames:
            self._deliver(frame)
        self.sidebands.publish(event)

    def on_playback(self, kind: str, response_id: str) -> None:
        """The playout's report: a response's audio ``queued`` at the carrier, ``started`` or
        ``stopped`` playing."""
        self.heard_at = self.clock()
        if kind != "queued":  # OpenAI's output_audio_buffer events are started and stopped
            self.sidebands.publish(self.bridge.playback(kind, response_id))
        # the session counts its reply as playing by what the caller heard, not by its own model
        if (report := self.bridge.playback_report(kind, response_id)) is not None:
            self._deliver(report)

    def prepend(self, frames: list[str]) -> None:
        """Frames the session gets before anything from the caller (its set-up, a greeting)."""
        for frame in frames:
            self._inbound.put_nowait(frame)

    async def attach(self, socket: Socket, withheld: Withheld | None = None) -> None:
        """A sideband WebSocket: it hears the call's events (but those ``withheld``) and may send its
        own, until either ends."""

        def deliver(frame: str) -> None:
            if (out := self.bridge.client_frame(frame, self.encoding)) is not None:
                self._deliver(out)

        await self.sidebands.attach(socket, self._ended, deliver, withheld)

    # ---- ending

    def end(self, reason: str) -> None:
        """End the call (once): the session sees its client leave; ``on_end`` hangs up."""
        if self.ended:
            return
        self.machine.move(_S.ENDED)
        self.end_reason = reason
        self._ended.set()
        log.info("%s call %s ended: %s", self.kind, self.id, reason)
        self._inbound.put_nowait(None)
        self.sidebands.close()
        try:
            self.on_end(reason)
        except Exception:
            log.exception("%s call %s: hanging up failed", self.kind, self.id)

    async def wait_ended(self) -> None:
        await self._ended.wait()

    def _tell_heard(self, playout: Playout, item_id: str, audio_end_ms: int) -> None:
        """The session cut an item where it thinks playback was; the caller may have heard less."""
        response_id = self._items.get(item_id)
        if response_id is None:
            return
        heard = int(playout.heard_ms(response_id))
        if heard < audio_end_ms:
            self._deliver(self.bridge.heard(item_id, heard))

    async def _hang_up_after_goodbye(self) -> None:
        deadline = self.clock() + HANG_UP_GRACE_S
        await asyncio.sleep(0.3)  # the goodbye's last audio may still be on its way from the worker
        while self.clock() < deadline:
            playout = self.playout
            if playout is None or (playout.playing is None and not playout.buffered):
                break
            await asyncio.sleep(0.1)
        self.end("the agent ended the call")

    async def _press(self, tool_call_id: str, digits: str) -> None:
        """The agent's send_dtmf: press the keys, then give the session the tool's output."""
        async with self._pressing:
            keypad = self.keypad
            if keypad is None:
                output = {"error": f"a {self.kind} call cannot send keys"}
            elif not 0 < len(digits) <= MAX_KEYS or any(d not in DIGITS for d in digits.upper()):
                output = {"error": f"digits must be 1 to {MAX_KEYS} of 0-9, *, #, A-D; got {digits[:40]!r}"}
            else:
                try:
                    await keypad(digits.upper())
                    output = {"pressed": digits.upper()}
                except (InvalidDtmf, KeysUnavailable) as exc:
                    output = {"error": str(exc)}
            self.heard_at = self.clock()
            log.info("%s call %s: send_dtmf %r: %s", self.kind, self.id, digits[:40], output)
            self._deliver(self.bridge.tool_output(tool_call_id, output))

    async def _watch_idle(self) -> None:
        while not self.ended:
            await asyncio.sleep(min(1.0, self.idle_timeout_s / 4))
            playout = self.playout
            busy = playout is not None and (playout.playing is not None or playout.buffered > 0)
            if busy:
                self.heard_at = self.clock()
            elif self.state is _S.ACTIVE and self.clock() - self.heard_at > self.idle_timeout_s:
                self.end(f"nobody spoke for {self.idle_timeout_s:g} s")

    def _deliver(self, frame: str) -> None:
        if not self.ended:
            self._inbound.put_nowait(frame)

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def start_call(
    ctx: GatewayContext,
    protocol: WireProtocol,
    call: PhoneCall,
    opening: Callable[[], list[str]],
    host: str | None,
) -> None:
    """Hold ``call`` where hang-ups and sidebands find it, and run its session once it is answered
    (at once for an answered one): ``opening`` gives the session's first frames then (a call
    omnivox places learns its codec from the answer)."""

    async def session(c: PhoneCall) -> None:
        if await c.wait_answered():
            await serve_session(c, protocol, ctx, c.id, {}, {}, opening(), host, bridge=True)

    ctx.calls.start(call, session)
