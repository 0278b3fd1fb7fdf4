"""WebRTC calls: a session whose audio travels as Opus RTP tracks and whose events on a data channel.

The call is a ``Socket`` to the one client edge (``serve_session``): it is admitted, queued, limited,
counted and recorded like a WebSocket session, and the worker serves the same session it serves a
WebSocket. What differs is only how frames move, and the protocol's ``MediaBridge`` says that:
microphone audio becomes client frames, the worker's audio goes to our track (``call_audio``) and
its other events to the data channel, and any sideband WebSockets (``?call_id=``) hear the events
too and may send their own. The call reads every frame the worker sends (omnivox's own events act on
its track: a reply paused over speech, resumed); the data channel and each sideband are sent those
their client asked for (``withheld``: ``?omnivox_events=true`` on realtime).

A call's life is an explicit state machine:

    CONNECTING ──media up──> CONNECTED ──> ENDED
        └──────── no media within webrtc_connect_timeout_s, hang-up, error ───────┘

It ends when the peer connection fails or closes, the data channel closes, a hang-up, the session
ends (the worker or the edge closes it), or when media never connects in time; ending frees the
worker like a WebSocket client that left. Its session waits for the media to connect before it
queues for a worker (``media_connected``): a caller gone after its offer never holds one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from enum import StrEnum
from typing import Any, Protocol

import aioice.ice
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.jitterbuffer import JitterBuffer
from aiortc.mediastreams import MediaStreamTrack

from omnivox.connection.sockets import PeerGone, Socket
from omnivox.core.errors import InvalidMessage, NotFound, TooManySessions
from omnivox.core.ids import new_id
from omnivox.core.transitions import Machine
from omnivox.gateway.edges.call_audio import WebRtcPlayout, hear
from omnivox.gateway.edges.sidebands import Sidebands
from omnivox.protocol.media import MediaBridge
from omnivox.protocol.spec import Withheld

log = logging.getLogger(__name__)

_MAX_INBOUND = 500  # frames waiting for the session (12 s of microphone audio); more audio is dropped
# aiortc holds 4 audio packets (80 ms) before it decodes the first: a cushion for speakers. The
# caller's audio goes to speech recognition, which wants it soon rather than smooth: hold 2 (40 ms).
RECEIVE_PREFETCH = 2


class CallState(StrEnum):
    CONNECTING = "connecting"  # answered; ICE and DTLS under way
    CONNECTED = "connected"  # media flows
    ENDED = "ended"


_S = CallState
TRANSITIONS = {
    _S.CONNECTING: frozenset({_S.CONNECTED, _S.ENDED}),
    _S.CONNECTED: frozenset({_S.ENDED}),
    _S.ENDED: frozenset(),
}


def only_addresses(addresses: list[str]) -> None:
    """Offer only ``addresses`` as ICE host candidates, in this process (aioice gathers every
    interface but loopback and has no per-connection setting for it)."""
    fixed = list(addresses)
    aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: fixed


def keep_candidates(sdp: str, addresses: list[str]) -> str:
    """``sdp`` without the ICE candidates on addresses other than ``addresses``."""
    lines = sdp.split("\r\n") if "\r\n" in sdp else sdp.split("\n")
    kept = [
        line
        for line in lines
        if not line.startswith("a=candidate:") or (len(parts := line.split()) > 4 and parts[4] in addresses)
    ]
    return ("\r\n" if "\r\n" in sdp else "\n").join(kept)


class InvalidSdp(InvalidMessage):
    code = "invalid_sdp"
    http_status = 400


class Call:
    """One WebRTC call: its peer connection, and the ``Socket`` its session runs on."""

    def __init__(
        self,
        bridge: MediaBridge,
        connect_timeout_s: float,
        addresses: list[str] | None = None,
        withheld: Withheld | None = None,
    ) -> None:
        self.id = new_id("rtc")
        self.withheld = withheld  # events the caller's data channel is not sent (it did not ask)
        self.addresses = addresses or []  # the only ICE host addresses (none: every interface)
        if self.addresses:
            only_addresses(self.addresses)
        self.bridge = bridge
        self.connect_timeout_s = connect_timeout_s
        self.machine = Machine(TRANSITIONS, _S.CONNECTING, "call state")
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))  # host candidates: no STUN lookups
        self.playout = WebRtcPlayout(bridge.output_rate, self._playback)
        self.pc.addTrack(self.playout)
        self.channel: Any = None
        self.end_reason: str | None = None
        self.dropped = False  # Socket: the peer vanished (the call failed) rather than hung up
        self.close_code: int | None = None
        self._inbound: asyncio.Queue[str | None] = asyncio.Queue()
        self._pending: list[str] = []  # events for the data channel before it opens
        self._opened = asyncio.Event()
        self._connected = asyncio.Event()
        self._ended = asyncio.Event()
        self.sidebands = Sidebands()
        self._tasks: set[asyncio.Task[None]] = set()
        self.pc.on("datachannel", self._on_channel)
        self.pc.on("track", self._on_track)
        self.pc.on("connectionstatechange", self._on_state)

    kind = "webrtc"

    @property
    def state(self) -> CallState:
        return self.machine.state

    @property
    def ended(self) -> bool:
        return self.state is _S.ENDED

    async def answer(self, offer_sdp: str) -> str:
        """The SDP answer to the caller's offer; raises ``InvalidSdp``."""
        if not offer_sdp.lstrip().startswith("v=0"):
            raise InvalidSdp("the body is not an SDP offer (it must start with v=0)", param="sdp")
        if self.addresses:
            offer_sdp = keep_candidates(offer_sdp, self.addresses)
        try:
            await self.pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
            await self.pc.setLocalDescription(await self.pc.createAnswer())
        except Exception as exc:  # aiortc raises ValueError, KeyError, ... on offers it cannot take
            await self.pc.close()
            raise InvalidSdp(f"the SDP offer cannot be answered: {exc}", param="sdp") from None
        return self.pc.localDescription.sdp

    async def run(self, session: Callable[[Call], Awaitable[None]]) -> None:
        """Serve the call's session; end the call if its media does not connect in time."""
        watchdog = self._spawn(self._watch_connect())
        try:
            await session(self)
        finally:
            watchdog.cancel()
            self.end("the session ended")
            await self._shutdown()

    async def media_connected(self) -> bool:
        """Wait until the call's media connects (True) or the call ends first (False): a session
        takes a worker only then, so a caller that vanished after its offer never holds one."""
        connected = asyncio.ensure_future(self._connected.wait())
        ended = asyncio.ensure_future(self._ended.wait())
        try:
            await asyncio.wait({connected, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            connected.cancel()
            ended.cancel()
        return self.state is _S.CONNECTED

    # ---- Socket (what the session reads and writes)

    async def receive(self) -> str | bytes | None:
        return await self._inbound.get()

    async def send(self, frame: str | bytes) -> None:
        if self.state is _S.ENDED:
            raise PeerGone(self.end_reason or "the call ended")
        route = self.bridge.route(frame.decode() if isinstance(frame, bytes) else frame)
        if route.audio:
            self.playout.push(route.response_id, route.audio)
        if route.pause:
            self.playout.pause()
        if route.resume:
            self.playout.resume()
        if route.clear:
            playing = self.playout.clear(route.response_id)
            if playing is not None and not route.cleared_event:
                self._event(self.bridge.playback("cleared", playing))
        if route.event is not None:
            self._event(route.event)
        if route.audio_over and route.response_id is not None:
            self.playout.audio_over(route.response_id)

    async def close(self, code: int = 1000) -> None:
        self.close_code = code
        if self.channel is None and self._pending:
            # the caller has not opened the data channel yet: give it a moment to hear why
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._opened.wait(), min(3.0, self.connect_timeout_s))
        self.end(f"the session closed ({code})")

    # ---- sidebands

    async def attach(self, socket: Socket, withheld: Withheld | None = None) -> None:
        """A sideband WebSocket: it hears the call's events (but those ``withheld``) and may send its
        own, until either ends."""

        def deliver(frame: str) -> None:
            if (out := self.bridge.client_frame(frame)) is not None:
                self._deliver(out)

        await self.sidebands.attach(socket, self._ended, deliver, withheld)

    # ---- ending

    def end(self, reason: str) -> None:
        """End the call (once): the session sees its client leave; the peer connection closes."""
        if self.state is _S.ENDED:
            return
        self.machine.move(_S.ENDED)
        self.end_reason = reason
        self._ended.set()
        log.info("call %s ended: %s", self.id, reason)
        self._inbound.put_nowait(None)
        self.sidebands.close()
        self._spawn(self._shutdown())

    async def _shutdown(self) -> None:
        self.playout.stop()
        await self.pc.close()

    # ---- aiortc callbacks

    def _on_channel(self, channel: Any) -> None:
        if channel.label != self.bridge.channel_label or self.channel is not None:
            return
        self.channel = channel
        channel.on("message", self._on_message)
        channel.on("close", lambda: self.end("the data channel closed"))
        pending, self._pending = self._pending, []
        for event in pending:
            channel.send(event)
        self._opened.set()

    def _on_message(self, message: str | bytes) -> None:
        if isinstance(message, str) and (frame := self.bridge.client_frame(message)) is not None:
            self._deliver(frame)

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind != "audio":
            return
        for transceiver in self.pc.getTransceivers():
            receiver = transceiver.receiver
            if receiver.track is track and hasattr(receiver, "_RTCRtpReceiver__jitter_buffer"):
                receiver._RTCRtpReceiver__jitter_buffer = JitterBuffer(capacity=16, prefetch=RECEIVE_PREFETCH)
        self._spawn(self._hear(track))

    async def _hear(self, track: MediaStreamTrack) -> None:
        """The caller's audio until the track or the call ends: a track whose media never came (the
        caller vanished after its offer) never ends by itself, and would be destroyed pending."""
        hearing = asyncio.ensure_future(hear(track, self.bridge.input_rate, self._on_audio))
        ended = asyncio.ensure_future(self._ended.wait())
        try:
            await asyncio.wait({hearing, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (hearing, ended):
                task.cancel()
            await asyncio.gather(hearing, ended, return_exceptions=True)

    def _on_audio(self, pcm: bytes) -> None:
        if self._inbound.qsize() < _MAX_INBOUND:  # past that the session is not reading: drop audio
            self._deliver(self.bridge.audio_in(pcm))

    async def _on_state(self) -> None:
        state = self.pc.connectionState
        if state == "connected" and self.state is _S.CONNECTING:
            self.machine.move(_S.CONNECTED)
            self._connected.set()
        elif state in ("failed", "closed"):
            self.dropped = state == "failed"
            self.end(f"the peer connection {state}")

    async def _watch_connect(self) -> None:
        try:
            await asyncio.wait_for(self._connected.wait(), self.connect_timeout_s)
        except TimeoutError:
            self.dropped = True
            self.end(f"media did not connect within {self.connect_timeout_s:g} s")

    # ---- helpers

    def _deliver(self, frame: str) -> None:
        if self.state is not _S.ENDED:
            self._inbound.put_nowait(frame)

    def _event(self, event: str) -> None:
        self.sidebands.publish(event)
        if self.withheld is not None and self.withheld(event):
            return
        channel = self.channel
        if channel is not None and channel.readyState == "open":
            try:
                channel.send(event)
            except ValueError as exc:  # larger than the caller's data channel takes (its max-message-size)
                log.warning("call %s: an event was not sent: %s", self.id, exc)
        elif channel is None:
            self._pending.append(event)

    def _playback(self, kind: str, response_id: str) -> None:
        self._event(self.bridge.playback(kind, response_id))
        # the session counts its reply as playing by what the track played, not by its own model
        if (report := self.bridge.playback_report(kind, response_id)) is not None:
            self._deliver(report)

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


class HeldCall(Protocol):
    """What the registry needs of a call (a WebRTC call, a phone call)."""

    id: str
    kind: str

    @property
    def ended(self) -> bool: ...

    async def run(self, session: Callable[[Any], Awaitable[None]]) -> None: ...

    async def attach(self, socket: Socket, withheld: Withheld | None = None) -> None: ...

    def end(self, reason: str) -> None: ...


class CallRegistry:
    """The calls the gateway holds, by id (WebRTC and phone calls alike: sidebands and hang-ups
    find either). ``on_change(call_id, held)`` hears each call start and end (gateways sharing a
    store tell the others which gateway holds a call)."""

    def __init__(self, on_change: Callable[[str, bool], None] | None = None) -> None:
        self.calls: dict[str, HeldCall] = {}
        self.on_change = on_change
        self._tasks: set[asyncio.Task[None]] = set()
        self._reserved: Counter[str] = Counter()  # places held by calls being set up, by kind
        self._opened_with: dict[str, bytes] = {}  # call id -> digest of the ephemeral key that opened it

    def __len__(self) -> int:
        return len(self.calls)

    def count(self, kind: str) -> int:
        """Calls of ``kind`` held, and those being set up."""
        return sum(1 for call in self.calls.values() if call.kind == kind) + self._reserved[kind]

    @contextlib.contextmanager
    def reserve(self, kind: str, limit: int) -> Iterator[None]:
        """Hold one of ``limit`` places for a call of ``kind`` while it is set up (its offer answered):
        checked and taken in one step, so concurrent offers cannot all pass the check. The place is
        the call's once it ``start``s; given back if setting it up fails."""
        if self.count(kind) >= limit:
            raise TooManySessions(f"the gateway holds {self.count(kind)} {kind} calls, its limit")
        self._reserved[kind] += 1
        try:
            yield
        finally:
            self._reserved[kind] -= 1

    def opened_with(self, call_id: str, key_digest: bytes) -> bool:
        """Whether the call was opened with the ephemeral key of this digest (it controls the call)."""
        opened = self._opened_with.get(call_id)
        return opened is not None and hmac.compare_digest(opened, key_digest)

    def held(self, call_id: str | None) -> bool:
        """Whether this gateway holds the call (None: a session that names no call)."""
        return call_id is None or call_id in self.calls

    def find(self, call_id: str | None) -> HeldCall | None:
        """The call a sideband names (None when it names none); raises ``CallNotFound``."""
        if call_id is None:
            return None
        call = self.calls.get(call_id)
        if call is None or call.ended:
            raise NotFound(f"no call {call_id!r} is in progress", param="call_id")
        return call

    def start(
        self, call: HeldCall, session: Callable[[Any], Awaitable[None]], opened_with: bytes | None = None
    ) -> None:
        """Hold ``call`` and run its ``session``; ``opened_with``: the digest of the ephemeral key that
        opened it (that key may then control it: a sideband, a hang-up)."""
        self.calls[call.id] = call
        if opened_with is not None:
            self._opened_with[call.id] = opened_with
        if self.on_change is not None:
            self.on_change(call.id, True)

        async def run() -> None:
            try:
                await call.run(session)
            finally:
                self.calls.pop(call.id, None)
                self._opened_with.pop(call.id, None)
                if self.on_change is not None:
                    self.on_change(call.id, False)

        task = asyncio.create_task(run(), name=f"call-{call.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for call in list(self.calls.values()):
            call.end("the gateway is shutting down")
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
