"""What the caller hears of the session's replies, and when: the two ways a phone call plays audio.

- ``PacedPlayout`` (SIP/RTP): omnivox itself sends the caller one 20 ms packet at a time, in real
  time, so what was taken from it is what was heard (less the network's few milliseconds).
- ``MarkedPlayout`` (carrier media streams): the carrier buffers and plays what it is sent, and
  echoes a marker once the audio before it has played; only echoed markers count as heard. A
  response's ``started`` is the echo of a marker sent just before its first audio (the carrier
  echoes it once what it was playing before is over), not the moment omnivox sent the audio: a
  carrier with seconds buffered starts the reply that much later. When the audio is sent it reports
  ``queued``: the listener will say when it starts and stops (the session waits for that rather
  than end the reply by its own model while the carrier has not even begun it).

Both report ``started`` when a response's audio begins to play and ``stopped`` once all of it
has played (``on_playback``), keep per response how much was heard (``heard_ms``), hold playback
when the session pauses a reply for speech over it (``pause``/``resume``: the caller hears it
stop at once and, if it was nothing, go on from the same sample) and drop what is left when the
reply is cut (``clear``). Audio is G.711: one byte per sample at 8 kHz.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

RATE = 8000
FRAME_MS = 20
FRAME_BYTES = RATE * FRAME_MS // 1000
SILENCE = {"audio/pcmu": b"\xff", "audio/pcma": b"\xd5"}

OnPlayback = Callable[[str, str], None]  # (queued | started | stopped, response id)


def ms(n_bytes: int) -> float:
    return n_bytes * 1000 / RATE


class _Ledger:
    """The bookkeeping both share: the response playing, which ones are over or cut, what was heard."""

    def __init__(self, on_playback: OnPlayback) -> None:
        self.on_playback = on_playback
        self.playing: str | None = None
        self.paused = False
        self._over: set[str] = set()
        self._cut: set[str] = set()
        self._heard: dict[str, int] = {}  # bytes heard, per response

    def heard_ms(self, response_id: str) -> float:
        return ms(self._heard.get(response_id, 0))

    def _begin(self, response_id: str | None) -> None:
        if response_id is not None and response_id != self.playing:
            self._stop()
            self.playing = response_id
            self.on_playback("started", response_id)

    def _stop(self) -> None:
        playing, self.playing = self.playing, None
        if playing is not None:
            self._over.discard(playing)
            self.on_playback("stopped", playing)

    def _count(self, response_id: str | None, n_bytes: int) -> None:
        if response_id is not None:
            self._heard[response_id] = self._heard.get(response_id, 0) + n_bytes

    def _cut_now(self, response_id: str | None) -> str | None:
        for rid in (response_id, self.playing):
            if rid is not None:
                self._cut.add(rid)
        playing, self.playing = self.playing, None
        self.paused = False
        return playing


class PacedPlayout(_Ledger):
    """Reply audio for a paced sender: ``take`` gives the next 20 ms frame (silence when there is
    nothing to play or playback is held)."""

    def __init__(self, on_playback: OnPlayback, encoding: str = "audio/pcmu") -> None:
        super().__init__(on_playback)
        self.silence = SILENCE[encoding] * FRAME_BYTES
        self._chunks: deque[tuple[str | None, bytes]] = deque()
        self.buffered = 0

    def push(self, response_id: str | None, audio: bytes) -> None:
        if response_id in self._cut or not audio:
            return
        self._chunks.append((response_id, audio))
        self.buffered += len(audio)

    def audio_over(self, response_id: str) -> None:
        self._over.add(response_id)
        if self.playing == response_id and not self.buffered:
            self._stop()

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def clear(self, response_id: str | None = None) -> str | None:
        """Drop what was not played; returns the response that was playing, if one was."""
        self._chunks.clear()
        self.buffered = 0
        return self._cut_now(response_id)

    def take(self) -> bytes:
        if self.paused or not self._chunks:
            return self.silence
        out = bytearray()
        while len(out) < FRAME_BYTES and self._chunks:
            rid, audio = self._chunks[0]
            self._begin(rid)
            need = FRAME_BYTES - len(out)
            out += audio[:need]
            self._count(rid, min(need, len(audio)))
            if len(audio) > need:
                self._chunks[0] = (rid, audio[need:])
            else:
                self._chunks.popleft()
        self.buffered -= len(out)
        if not self._chunks and self.playing in self._over:
            self._stop()
        return bytes(out) + self.silence[: FRAME_BYTES - len(out)]


@dataclass
class _Sent:
    name: str  # the marker after it
    response_id: str | None
    audio: bytes


class MarkedPlayout(_Ledger):
    """Reply audio for a carrier that plays what it is sent and echoes markers: each chunk goes out
    at once with a marker after it; an echoed marker counts its chunk as heard. ``send`` takes the
    carrier's actions: ``("media", audio)``, ``("mark", name)``, ``("clear", None)``."""

    def __init__(self, on_playback: OnPlayback, send: Callable[[str, bytes | str | None], None]) -> None:
        super().__init__(on_playback)
        self.send = send
        self._pending: deque[_Sent] = deque()  # sent, not yet heard
        self._held: list[_Sent] = []  # taken back by a pause, to send again on resume
        # a cleared marker's echo (Twilio sends them, Plivo never does) finds nothing pending under
        # its name (names are never reused, resent audio gets a new one): it counts nothing, and no
        # set of cleared names grows for the whole call
        self._n = 0
        self._starts: dict[str, str] = {}  # markers sent before a response's first audio: its start
        self._announced: str | None = None  # the response whose start marker went out last
        self._queued: set[str] = set()  # responses reported ``queued`` (once each)

    @property
    def buffered(self) -> int:
        return sum(len(s.audio) for s in self._pending) + sum(len(s.audio) for s in self._held)

    def push(self, response_id: str | None, audio: bytes) -> None:
        if response_id in self._cut or not audio:
            return
        sent = _Sent(self._name(), response_id, audio)
        if self.paused:
            self._held.append(sent)
        else:
            self._out(sent)

    def _name(self) -> str:
        self._n += 1
        return f"omnivox-{self._n}"

    def _out(self, sent: _Sent) -> None:
        rid = sent.response_id
        if rid is not None and rid not in (self._announced, self.playing):
            name = self._name()
            self._starts[name] = rid
            self._announced = rid
            self.send("mark", name)
            if rid not in self._queued:
                self._queued.add(rid)
                self.on_playback("queued", rid)  # the carrier has it: its start will be reported
        self.send("media", sent.audio)
        self.send("mark", sent.name)
        self._pending.append(sent)

    def audio_over(self, response_id: str) -> None:
        self._over.add(response_id)
        if self.playing == response_id and not self._left(response_id):
            self._stop()

    def _left(self, response_id: str | None) -> bool:
        """Whether some of the response's audio has not played yet (sent, or held by a pause)."""
        return any(s.response_id == response_id for s in (*self._pending, *self._held))

    def marked(self, name: str) -> None:
        """The carrier echoed a marker: the audio before it has played (unless it was cleared)."""
        if (starting := self._starts.pop(name, None)) is not None:
            self._begin(starting)  # what played before it is over: this response begins now
            return
        if all(s.name != name for s in self._pending):
            return  # not ours, already counted, or cleared
        while self._pending:
            sent = self._pending.popleft()
            if sent.response_id not in self._cut:
                self._begin(sent.response_id)  # its start marker's echo was lost: it has played
            self._count(sent.response_id, len(sent.audio))
            if sent.name == name:
                break
        if self.playing in self._over and not self._left(self.playing):
            self._stop()

    def pause(self) -> None:
        """Stop the carrier's playback now; what it had not played is sent again on ``resume``."""
        if self.paused:
            return
        self.paused = True
        if self._pending:
            self.send("clear", None)
            self._held = [*self._pending, *self._held]
            self._pending.clear()
        self._forget_starts()

    def resume(self) -> None:
        self.paused = False
        held, self._held = self._held, []
        for sent in held:
            self._out(_Sent(self._name(), sent.response_id, sent.audio))

    def clear(self, response_id: str | None = None) -> str | None:
        # a response sent whose start the carrier has not echoed yet is cut (and answered) too
        sent = next((s.response_id for s in (*self._pending, *self._held) if s.response_id), None)
        if self._pending:
            self.send("clear", None)
        self._pending.clear()
        self._held.clear()
        self._forget_starts()
        playing = self._cut_now(response_id)
        if sent is not None and playing is None:
            self._cut.add(sent)
            return sent
        return playing

    def _forget_starts(self) -> None:
        """The carrier dropped its buffer: start markers in it never mean a start (Twilio echoes
        them at the clear); a response not started yet gets a new one with its audio sent again."""
        self._starts.clear()
        self._announced = None
