"""Scripted conversations: callers that talk like people, over a speakerphone, against /v1/realtime.

Each caller (one per synthetic voice: hibari, espeak-ng) holds one realtime session with its
microphone always open, paced in real time (``bench realtime``'s caller, with a speakerphone: every
reply plays into its microphone ``--delay-ms`` later at ``--gain-db``, ``testing.speakerphone``). Its
script, per turn: a question (every other one with a mid-sentence pause shorter than the turn's
silence), then, one second into the reply, one of: nothing (the echo alone), a backchannel, a noise
burst, or a real barge-in (a sentence, which becomes the next question's answer).
``--interject-left-ms N`` interjects as the reply plays out instead: once it has sent all its audio
and the caller's player has at most N ms of it left (where the server's model of the player has it
over first). Its player honours
``omnivox.interruption.paused`` / ``.resumed`` and drops a cancelled or truncated reply's unplayed
audio.

Counted per turn:
- false barge-ins: a reply cancelled by its own echo, a backchannel or a noise burst. Every reply
  plays into the microphone, so every reply counts for the echo: a cancel (or a pause) is the echo's
  when the speech the server heard began while the caller was saying nothing;
- noise bursts: paused then resumed (or never paused: silero heard no speech in them);
- missed barge-ins: a real barge-in after which the reply played on (it was neither cancelled nor,
  when it had already sent all its audio, truncated); reaction: from the barge-in's first voiced
  sample to the player stopping (the pause event, or the cancel or truncation);
- end of turn: early when the turn was committed before the question's speech ended (in its mid-
  sentence pause), late when no reply began within ``--late-s`` of its end, else right;
- voice-to-voice: the question's last voiced sample to the reply's first audio;
- verdicts: every judgement of speech over a reply (``omnivox.interruption.judged``: no_words,
  no_speech, backchannel, echo, unclear, sounds_backchannel, words; ``waited``: an early partial's
  words that did not cut, the settled words judged after) by what the caller did then.

``--line g711`` calls over a telephone line: the session's audio in and out is G.711 mu-law at 8 kHz
(``audio/pcmu``), the caller's microphone is band-limited to it and the reply is heard from it, and
the session is told it is on a phone line (``omnivox.line``, as the gateway tells a phone call's).
``--noise`` (babble, pink, fan: ``bench noise``'s) plays behind the caller all call long at
``--snr-db`` under its voice; ``--noise-reduction`` asks the session for ``noise_reduction``;
``--eagerness`` turns on ``semantic_vad`` instead of server VAD. ``--playback-reports`` has the
caller's player report each reply's playback (``omnivox.output_audio_buffer.report``: started,
stopped), as a WebRTC call's track and a carrier's marks do, instead of leaving it to the server's
model of the player.

Between turns the caller waits for quiet: the server has heard the end of everything it said (a
barge-in's words go on after the cut, and become a turn that is answered), every reply has ended
and played out, and nothing came for 1.5 s; then half a second more.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
from collections.abc import AsyncIterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import cycle
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection

from omnivox.audio.g711 import ulaw_decode, ulaw_encode
from omnivox.audio.pcm import b64_to_pcm16
from omnivox.audio.resample import StreamResampler, resample
from omnivox.bench import realtime
from omnivox.bench.table import percentile, print_table, write_json
from omnivox.protocol.realtime.events import ga_type
from omnivox.testing.cluster import cluster
from omnivox.testing.speakerphone import Speakerphone

RATE = 24000
QUESTIONS = (
    ("what is the weather like in paris today", None),
    ("can you remind me to", "call my sister tomorrow"),
    ("how long does it take to boil an egg", None),
    ("i would like to book a table for", "four people tonight"),
    ("tell me a short story about a fox", None),
    ("what time does the museum", "open on sunday"),
)
BACKCHANNELS = ("yeah", "okay", "right", "mm hmm", "i see")
NOISES = ("[[h@@]]", "[[hV]]", "[[h@@ h@@]]")  # breathy coughs (espeak-ng phonemes: no words)
BARGE_INS = ("wait, stop, what about tomorrow", "actually, tell me about the train instead")
EVENTS = ("echo", "backchannel", "noise", "barge_in")  # what a caller does one second into a reply
COLUMNS = [
    "voice",
    "false: echo",
    "false: backchannel",
    "false: noise",
    "noise resumed",
    "barge-ins missed",
    "reaction p50 ms",
    "reaction p95 ms",
    "EOT right/early/late",
    "v2v p50 ms",
    "v2v p95 ms",
    "errors",
    "verdicts (echo / backchannel / noise / barge-in)",
]


@dataclass
class Tally:
    false: dict[str, int] = field(default_factory=lambda: {"echo": 0, "backchannel": 0, "noise": 0})
    tried: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EVENTS, 0))
    replies: int = 0  # replies played (each one over its own echo)
    echo_pauses: int = 0  # replies paused by their echo (then resumed, or cut: false above)
    noise_resumed: int = 0
    noise_unheard: int = 0
    missed: int = 0
    reaction_s: list[float] = field(default_factory=list)
    eot: dict[str, int] = field(default_factory=lambda: {"right": 0, "early": 0, "late": 0})
    v2v_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)  # per turn, for --json
    verdicts: dict[str, dict[str, int]] = field(default_factory=lambda: {e: {} for e in EVENTS})


def row(name: str, t: Tally) -> list[Any]:
    noise_paused = t.tried["noise"] - t.noise_unheard
    return [
        name,
        f"{t.false['echo']}/{t.replies} ({t.echo_pauses} paused)",
        f"{t.false['backchannel']}/{t.tried['backchannel']}",
        f"{t.false['noise']}/{t.tried['noise']}",
        f"{t.noise_resumed}/{noise_paused} ({t.noise_unheard} unheard)",
        f"{t.missed}/{t.tried['barge_in']}",
        percentile(t.reaction_s, 50) * 1000,
        percentile(t.reaction_s, 95) * 1000,
        f"{t.eot['right']}/{t.eot['early']}/{t.eot['late']}",
        percentile(t.v2v_s, 50) * 1000,
        percentile(t.v2v_s, 95) * 1000,
        len(t.errors),
        " / ".join(",".join(f"{v} {n}" for v, n in sorted(t.verdicts[e].items())) or "-" for e in EVENTS),
    ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--turns", type=int, default=20, help="turns per caller (voice)")
    parser.add_argument("--voices", nargs="+", default=["hibari", "espeak"], help="hibari, espeak")
    parser.add_argument("--delay-ms", type=float, default=80.0, help="speaker to microphone delay")
    parser.add_argument("--gain-db", type=float, default=-10.0, help="speaker to microphone level")
    parser.add_argument("--chunk-ms", type=int, default=40, help="audio per append")
    parser.add_argument("--silence-ms", type=int, default=500, help="server VAD silence_duration_ms")
    parser.add_argument("--mid-pause-ms", type=int, default=350, help="the pause inside a paused question")
    parser.add_argument("--late-s", type=float, default=2.0, help="a reply later than this is late")
    parser.add_argument("--llm", default="local", help="local (default), echo")
    parser.add_argument("--llm-url", help="an OpenAI-compatible LLM server instead")
    parser.add_argument("--asr", default="whisper", help="whisper (default), pocketsphinx")
    parser.add_argument("--echo-guard", default="on", choices=["on", "off"], help="the word check")
    parser.add_argument("--echo-canceller", default="gate", choices=["gate", "aec3", "none"])
    parser.add_argument("--log-dir", help="keep the server logs here")
    parser.add_argument("--line", default="wide", choices=["wide", "g711"], help="g711: a telephone line")
    parser.add_argument("--noise", default="none", choices=["none", "babble", "pink", "fan"])
    parser.add_argument("--snr-db", type=float, default=10.0, help="the caller's voice over the noise")
    parser.add_argument("--noise-reduction", default="none", choices=["none", "near_field", "far_field"])
    parser.add_argument("--eagerness", choices=["low", "medium", "high", "auto"], help="semantic_vad")
    parser.add_argument(
        "--playback-reports", action="store_true", help="the player reports each reply's playback"
    )
    parser.add_argument(
        "--interject-left-ms",
        type=float,
        help="interject as each reply plays out, when its player has this much of it left (once it "
        "has sent all its audio), instead of one second into it",
    )


def onsets(audio: np.ndarray) -> tuple[int, int]:
    loud = np.nonzero(np.abs(audio) > 0.02)[0]
    return (int(loud[0]), int(loud[-1]) + 1) if len(loud) else (0, len(audio))


Entry = tuple[float, str, dict[str, Any]]  # (monotonic time, event type, the event)


class CallLog:
    """What a caller heard from the server (every event, timed, in order) and when it spoke itself
    (spans of its microphone stream): from these, who cancelled a reply and which pauses were the
    echo's."""

    def __init__(self) -> None:
        self.events: list[Entry] = []
        self.said: list[list[int]] = []  # [first, end) samples of the stream the caller spoke in

    def add(self, t: float, kind: str, event: dict[str, Any]) -> None:
        self.events.append((t, kind, event))

    def spoke(self, first: int, end: int) -> None:
        """The caller's voice is in samples [first, end) of its stream (joined to a span ending there)."""
        if self.said and self.said[-1][1] == first:
            self.said[-1][1] = end
        else:
            self.said.append([first, end])

    def first(self, kind: str, mark: int, rid: str | None = None) -> Entry | None:
        """The first event of ``kind`` from index ``mark`` on (of response ``rid``, if given)."""
        for entry in self.events[mark:]:
            if entry[1] == kind and (rid is None or response_id(entry[2]) == rid):
                return entry
        return None

    def count(self, kind: str) -> int:
        return sum(1 for _, k, _ in self.events if k == kind)

    def cut(self, rid: str) -> Entry | None:
        """The event that cut the reply short (None: it played out): its ``response.done`` with
        status cancelled, or, for a reply cut after it had sent all its audio (it completed, and its
        audio still played), the truncation of its message item (``conversation.item.truncated``)."""
        done = self.first("response.done", 0, rid)
        if done is not None and done[2]["response"]["status"] == "cancelled":
            return done
        items = {
            e["item"].get("id")
            for _, k, e in self.events
            if k == "response.output_item.added" and response_id(e) == rid
        }
        for entry in self.events:
            if entry[1] == "conversation.item.truncated" and entry[2].get("item_id") in items:
                return entry
        return None

    def cancelled(self, rid: str) -> bool:
        return self.cut(rid) is not None

    def cause(self, rid: str) -> str | None:
        """Who cut the reply: the ``caller`` or its ``echo`` (None: it was not cut)."""
        cut = self.cut(rid)
        return None if cut is None else self.speech_before(self.events.index(cut))

    def speech_before(self, index: int) -> str:
        """Whether the last speech the server heard before event ``index`` began while the caller was
        talking (``caller``) or silent (``echo``)."""
        for _, kind, e in reversed(self.events[:index]):
            if kind == "input_audio_buffer.speech_started":
                # the server pads the start by prefix_padding_ms (300): the speech is within 0.5 s after
                lo = e["audio_start_ms"] * RATE // 1000
                hi = lo + RATE // 2
                spoke = any(a < hi and b > lo for a, b in self.said)
                return "caller" if spoke else "echo"
        return "echo"

    def settle(
        self,
        tally: Tally,
        turn: int,
        event: str,
        rid: str,
        mark: int,
        said: str = "",
        times: dict[str, float] | None = None,
    ) -> None:
        """Count the echo's share of the turn that began at event ``mark``, and trace the turn
        (``said``: the caller's interjection, for ``bench interruptions --conversations``; ``times``:
        the caller's own moments, seconds from the reply's first audio, with the events' beside)."""
        if self.cause(rid) == "echo":
            tally.false["echo"] += 1
        for i, (_, kind, e) in enumerate(self.events[mark:], mark):
            if kind == "omnivox.interruption.paused" and e.get("response_id") == rid:
                tally.echo_pauses += self.speech_before(i) == "echo"
        traced = [
            (t, k)
            for t, k, _ in self.events[mark:]
            if k.startswith(("omnivox.", "input_audio_buffer.speech"))
        ]
        kinds = [k for _, k in traced]
        # an early partial's words that did not cut (``action`` wait) count as ``waited``
        judged = [
            ("waited" if e.get("action") == "wait" else e["verdict"], e["text"], e.get("evidence", {}))
            for _, k, e in self.events[mark:]
            if k == "omnivox.interruption.judged"
        ]
        for verdict, _, _ in judged:
            tally.verdicts[event][verdict] = tally.verdicts[event].get(verdict, 0) + 1
        done = self.first("response.done", 0, rid)
        tally.trace.append(
            {
                "turn": turn,
                "event": event,
                "status": done and done[2]["response"]["status"],
                "events": kinds,
                "judged": judged,
                "said": said,
            }
        )
        if times is not None and "reply" in times:
            # when each traced event came, and the reply's own: a reply the server ended (its
            # response.done) before the caller had heard it out shows here
            t0 = times.pop("reply")
            done_at = done[0] - t0 if done else None
            tally.trace[-1]["times"] = {
                **{k: round(v, 3) for k, v in times.items()},
                "response.done": done_at and round(done_at, 3),
                "events": [round(t - t0, 3) for t, _ in traced],
            }


class ConversationCaller(realtime.RealtimeCaller):
    """``bench realtime``'s caller with a speakerphone and a script of interjections."""

    def __init__(self, url: str, speak: Any, noise: Any, args: argparse.Namespace, offset: int) -> None:
        super().__init__(url, [], args)
        self.speak = speak
        self.noise = noise  # noise bursts are espeak-ng phonemes whatever the voice
        self.phone = Speakerphone(RATE, args.delay_ms, args.gain_db)
        self.tally = Tally()
        self.offset = offset
        self._voice: list[np.ndarray] = []  # what the caller is saying, still to record
        self._marks: list[tuple[int, str]] = []  # (sample index of the stream, what happens there)
        self._sent = 0
        self._start = 0.0
        self.log = CallLog()
        self._wake = asyncio.Event()
        self._background = background_noise(args)  # behind the caller all call long (None: quiet)
        self._to_line = StreamResampler(RATE, 8000)  # the telephone line (--line g711), each way
        self._from_line = StreamResampler(8000, RATE)
        self._reported: dict[str, str] = {}  # response id -> the last playback report sent
        self._items: dict[str, str] = {}  # message item id -> its response id

    def _session(self) -> dict:
        args = self.args
        session = super()._session()
        session["omnivox"] = {"echo_guard": args.echo_guard == "on", "echo_canceller": args.echo_canceller}
        audio = session["audio"]
        if args.eagerness:
            audio["input"]["turn_detection"] = {"type": "semantic_vad", "eagerness": args.eagerness}
        if args.noise_reduction != "none":
            audio["input"]["noise_reduction"] = {"type": args.noise_reduction}
        if args.line == "g711":
            audio["input"]["format"] = {"type": "audio/pcmu"}
            audio["output"] = {"format": {"type": "audio/pcmu"}}
            session["omnivox"]["line"] = "phone"  # as the gateway sets a phone call's session
        return session

    async def _talk(self, ws: ClientConnection, turns: int) -> None:
        self._start = time.monotonic()
        mic = asyncio.create_task(self._microphone(ws))
        try:
            events = cycle(EVENTS[(self.offset + i) % 4] for i in range(4))
            extras = {k: cycle(v) for k, v in (("backchannel", BACKCHANNELS), ("noise", NOISES))}
            barge = cycle(BARGE_INS)
            for turn in range(turns):
                first, second = QUESTIONS[(turn + self.offset) % len(QUESTIONS)]
                await self._turn(turn, first, second, next(events), extras, barge)
        finally:
            mic.cancel()

    async def _turn(
        self,
        turn: int,
        first: str,
        second: str | None,
        event: str,
        extras: Mapping[str, Iterator[str]],
        barge: Iterator[str],
    ) -> None:
        parts = [self.speak(first)]
        if second is not None:
            parts += [np.zeros(int(RATE * self.args.mid_pause_ms / 1000), np.float32), self.speak(second)]
        clip = np.concatenate(parts)
        _, hi = onsets(clip)
        mark = len(self.log.events)
        end_at = await self._say(clip, until=hi)  # returns when its last voiced sample was recorded
        committed = await self._until("input_audio_buffer.committed", mark, 12.0)
        reply = await self._reply_to(committed, 12.0)
        if committed is not None and committed[0] < end_at:
            self.tally.eot["early"] += 1
        elif reply is None or reply[0] - end_at > self.args.late_s:
            self.tally.eot["late"] += 1
        else:
            self.tally.eot["right"] += 1
        if reply is None:
            self.tally.errors.append("no reply")
            return
        self.tally.v2v_s.append(reply[0] - end_at)
        rid = reply[2]["response_id"]
        self.tally.replies += 1
        if self.args.interject_left_ms is None:
            await self._played(rid, 1.0)  # one second into the reply
            over = self.log.first("response.done", 0, rid) is not None
        else:  # as the reply plays out: it has sent everything, and its player has this much left
            await self._left(rid, self.args.interject_left_ms / 1000)
            over = not self.phone.holds(rid)
        times = {"reply": reply[0], "interjection": time.monotonic() - reply[0]}
        if over:  # over before anything was said
            await self._quiet()
            self.log.settle(self.tally, turn, event, rid, mark, times=times)
            return
        self.tally.tried[event] += 1
        interjection = ""
        if event == "echo":
            pass
        elif event == "barge_in":
            interjection = next(barge)
            words = self.speak(interjection)
            onset, _ = onsets(words)
            mark2 = len(self.log.events)
            said = asyncio.create_task(self._say(words))
            onset_at = await self._at_sample(self._sent + onset)
            await self._until("response.done", 0, 25.0, rid)
            await said  # (a reply that had sent all its audio is cut by its item's truncation, later)
            await self._until_any(("omnivox.interruption.judged", "conversation.item.truncated"), mark2, 2.0)
            stop = self.log.first("omnivox.interruption.paused", mark2, rid) or self.log.cut(rid)
            if stop is None or self.log.cause(rid) != "caller":
                self.tally.missed += 1
            else:
                self.tally.reaction_s.append(stop[0] - onset_at)
        else:
            interjection = next(extras[event])
            clip2 = self.speak(interjection) if event == "backchannel" else self.noise(interjection)
            mark2 = len(self.log.events)
            await self._say(clip2)
            await self._until("response.done", 0, 25.0, rid)
            # (a reply that had sent everything is done already: give the judge its time)
            await self._until("omnivox.interruption.judged", mark2, 2.0)
            if self.log.cause(rid) == "caller":
                self.tally.false[event] += 1
            elif event == "noise" and not self.log.cancelled(rid):
                paused = self.log.first("omnivox.interruption.paused", mark2, rid)
                resumed = self.log.first("omnivox.interruption.resumed", mark2, rid)
                self.tally.noise_resumed += resumed is not None
                self.tally.noise_unheard += paused is None
        times["played"] = self.phone.played.get(rid, 0) / RATE  # what the caller heard of the reply
        await self._quiet()
        self.log.settle(self.tally, turn, event, rid, mark, interjection, times)

    # ---- the microphone and the speaker

    async def _microphone(self, ws: ClientConnection) -> None:
        step = RATE * self.args.chunk_ms // 1000
        while True:
            voice = np.zeros(step, np.float32)
            got = 0
            while got < step and self._voice:
                take = min(step - got, len(self._voice[0]))
                voice[got : got + take] = self._voice[0][:take]
                self._voice[0] = self._voice[0][take:]
                got += take
                if not len(self._voice[0]):
                    self._voice.pop(0)
            if self._background is not None:
                at = self._sent % (len(self._background) - step)
                voice = voice + self._background[at : at + step]
            chunk = self.phone.record(voice)
            if self.args.playback_reports:
                await self._report_playback(ws)
            if got:
                self.log.spoke(self._sent, self._sent + got)
            self._sent += step
            due = self._start + self._sent / RATE
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": self._encode(chunk)}))
            self._wake.set()

    async def _report_playback(self, ws: ClientConnection) -> None:
        """Tell the server when the player began each reply and when it played the last of it."""
        for rid in self.phone.played:
            if rid not in self._reported:
                self._reported[rid] = "started"
                await ws.send(json.dumps(playback_report(rid, "started")))
        for rid, state in self._reported.items():
            done = self.log.first("response.done", 0, rid)
            if state == "started" and done is not None and not self.phone.holds(rid):
                self._reported[rid] = "stopped"
                if done[2]["response"]["status"] != "cancelled":  # (a cut reply the server stopped)
                    await ws.send(json.dumps(playback_report(rid, "stopped")))

    def _encode(self, chunk: np.ndarray) -> str:
        """A microphone chunk (24 kHz) as the session takes it: PCM16, or G.711 mu-law at 8 kHz."""
        if self.args.line == "g711":
            return base64.b64encode(ulaw_encode(self._to_line.process(chunk))).decode()
        return base64.b64encode((np.clip(chunk, -1, 1) * 32767).astype("<i2").tobytes()).decode()

    def _decode(self, delta: str) -> np.ndarray:
        """Reply audio as the speaker plays it (24 kHz)."""
        if self.args.line == "g711":
            return self._from_line.process(ulaw_decode(base64.b64decode(delta)))
        return b64_to_pcm16(delta)

    async def _say(self, clip: np.ndarray, until: int | None = None) -> float:
        """Say ``clip``; returns the moment its sample ``until`` (default: the end) was recorded."""
        while self._voice:
            await self._tick()
        start = self._sent  # the next chunk the microphone records starts here
        self._voice.append(clip.astype(np.float32))
        return await self._at_sample(start + (len(clip) if until is None else until))

    async def _at_sample(self, sample: int) -> float:
        while self._sent < sample:
            await self._tick()
        return self._start + sample / RATE

    async def _tick(self) -> None:
        self._wake.clear()
        await self._wake.wait()

    async def _played(self, rid: str, seconds: float) -> None:
        deadline = time.monotonic() + 15
        while self.phone.played.get(rid, 0) < seconds * RATE and time.monotonic() < deadline:
            if self.log.first("response.done", 0, rid) is not None and not self.phone.queued:
                return
            await self._tick()

    async def _left(self, rid: str, seconds: float) -> None:
        """Until the reply has sent all its audio and its player has at most ``seconds`` of it left."""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.log.first("response.done", 0, rid) is not None and self.phone.left(rid) <= seconds * RATE:
                return
            await self._tick()

    async def _quiet(self) -> None:
        """Until the server has heard the end of the caller's speech, every reply has ended and
        played out, and nothing came for 1.5 s; then half a second. (Without the first, a barge-in's
        own reply, which the server makes once the barge-in's words end, could begin just as the
        caller asks its next question over it: 8 of 20 echo turns did, before.)"""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            heard = self.log.count("input_audio_buffer.speech_stopped") >= self.log.count(
                "input_audio_buffer.speech_started"
            )
            done = heard and self.log.count("response.done") >= self.log.count("response.created")
            settled = (
                not self.log.events or time.monotonic() - self.log.events[-1][0] > 1.5
            )  # no reply on its way
            if done and settled and not self.phone.queued and not self._voice:
                break
            await self._tick()
        await asyncio.sleep(0.5)

    # ---- the events

    async def read_events(self, ws: AsyncIterable[str | bytes]) -> None:
        async for raw in ws:
            event = json.loads(raw)
            kind = ga_type(event["type"])
            now = time.monotonic()
            self.log.add(now, kind, event)
            phone = self.phone
            if kind == "response.output_audio.delta":
                phone.play(event["response_id"], self._decode(event["delta"]))
            elif kind == "omnivox.interruption.paused":
                phone.paused = True
            elif kind == "omnivox.interruption.resumed":
                phone.paused = False
            elif kind == "response.output_item.added":
                self._items[event["item"].get("id")] = event.get("response_id")
            elif kind == "response.done":
                phone.paused = False
                if event["response"]["status"] == "cancelled":
                    phone.drop(event["response"]["id"])
            elif kind == "conversation.item.truncated" and event.get("item_id") in self._items:
                # a reply cut after it had sent everything: what it had not played never plays (as
                # the phone and WebRTC bridges clear their players)
                phone.paused = False
                phone.drop(self._items[event["item_id"]])
            elif kind == "error":
                self.tally.errors.append(event["error"].get("code") or "error")

    async def _reply_to(self, committed: Entry | None, wait_s: float) -> Entry | None:
        """The first audio of a response created after ``committed`` (a reply still under way from an
        earlier turn is not this question's)."""
        if committed is None:
            return None
        after = self.log.events.index(committed)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            ids = {e["response"]["id"] for _, k, e in self.log.events[after:] if k == "response.created"}
            for entry in self.log.events[after:]:
                if entry[1] == "response.output_audio.delta" and entry[2]["response_id"] in ids:
                    return entry
            await self._tick()
        return None

    async def _until(self, kind: str, mark: int, wait_s: float, rid: str | None = None) -> Entry | None:
        return await self._until_any((kind,), mark, wait_s, rid)

    async def _until_any(
        self, kinds: tuple[str, ...], mark: int, wait_s: float, rid: str | None = None
    ) -> Entry | None:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            for entry in self.log.events[mark:]:
                if entry[1] in kinds and (rid is None or response_id(entry[2]) == rid):
                    return entry
            await self._tick()
        return None


def background_noise(args: argparse.Namespace) -> np.ndarray | None:
    """``--noise`` at 24 kHz, ``--snr-db`` under the voices' speech (None: no noise)."""
    if args.noise == "none":
        return None
    from omnivox.bench.noise import noise_source
    from omnivox.bench.turns import COMPLETE, synthetic_voices, trim
    from omnivox.bench.turns import RATE as TURNS_RATE

    voices = synthetic_voices()
    noise = noise_source(args.noise, voices, seconds=60.0)
    speech = np.concatenate([trim(voices[v](COMPLETE[0])) for v in voices])
    gain = np.sqrt(np.mean(speech**2) / np.mean(noise**2) / 10 ** (args.snr_db / 10))
    return resample((gain * noise).astype(np.float32), TURNS_RATE, RATE)


def playback_report(response_id: str, state: str) -> dict[str, str]:
    """The player's report (``omnivox.output_audio_buffer.report``): a reply ``started`` or ``stopped``."""
    return {"type": "omnivox.output_audio_buffer.report", "response_id": response_id, "state": state}


def response_id(event: dict) -> str | None:
    return event.get("response_id") or (event.get("response") or {}).get("id")


def _speakers(names: list[str]) -> dict[str, Any]:
    from omnivox.bench.turns import RATE as TURNS_RATE
    from omnivox.bench.turns import synthetic_voices, trim

    voices = synthetic_voices()
    out = {}
    for name in [*names, "espeak"]:
        if name not in voices:
            raise SystemExit(f"no voice {name!r} here (espeak needs espeak-ng installed)")
        cache: dict[str, np.ndarray] = {}

        def speak(text: str, fn: Any = voices[name], cache: dict = cache) -> np.ndarray:
            # trimmed to its voiced extent: hibari opens with ~320 ms of breath and ends with ~450 ms
            # of near silence, which made a question's mid-sentence pause 1.1 s, not --mid-pause-ms
            if text not in cache:
                cache[text] = trim(resample(fn(text), TURNS_RATE, RATE))
            return cache[text]

        out[name] = speak
    return out


def run(args: argparse.Namespace) -> int:
    args.mode = "server_vad"
    speakers = _speakers(args.voices)
    noise = speakers.pop("espeak") if "espeak" not in args.voices else speakers["espeak"]
    env = {"OMNIVOX_ASR": args.asr, "OMNIVOX_LLM": "openai" if args.llm_url else args.llm}
    if args.llm_url:
        env["OMNIVOX_LLM_URL"] = args.llm_url
    rows, results = [], {}
    for n, (name, speak) in enumerate(speakers.items()):
        log_dir = None
        if args.log_dir:
            from pathlib import Path

            log_dir = Path(args.log_dir) / name
            log_dir.mkdir(parents=True, exist_ok=True)
            env["OMNIVOX_LOG_LEVEL"] = "INFO"  # each interruption decision is logged
        with cluster(
            workers=1, engine="cascade", log_dir=log_dir, env={**realtime.PRODUCTION_INTERVALS, **env}
        ) as c:
            caller = ConversationCaller(f"{c.ws}/v1/realtime?omnivox_events=true", speak, noise, args, n)
            asyncio.run(caller.run(args.turns, 0.0))
        t = caller.tally
        t.errors += caller.stats.errors
        results[name] = t.__dict__
        rows.append(row(name, t))
    noise = f"{args.noise} noise at {args.snr_db:g} dB SNR" if args.noise != "none" else "no noise"
    print_table(
        f"Scripted conversations, {args.turns} turns per voice over a speakerphone "
        f"({args.delay_ms:.0f} ms, {args.gain_db:.0f} dB), {realtime.describe(args)}, "
        f"echo canceller {args.echo_canceller}, word check {args.echo_guard}, line {args.line}, {noise}, "
        f"noise_reduction {args.noise_reduction}, turn detection {args.eagerness or 'server_vad'}",
        COLUMNS,
        rows,
    )
    write_json(
        args.json, {"conversation": results, "args": {k: v for k, v in vars(args).items() if k != "json"}}
    )
    return 0
