"""The timeline's turns: who spoke when, what was said, what cut what off, how long replies took.

Built from the journal (one event a line, in the order the session's frames came) when a session
ends. Times are seconds on the session's clock, the same clock the merged replay plays on, so a
player's position is a place on the timeline.

- Audio chunks have a place (``start``, ``duration``); an assistant chunk heard only in part (a
  barge-in cut the playback) has a shorter ``heard`` end.
- A user turn's ends are where the protocol put them: positions in the user's audio stream (realtime
  server VAD, mapped onto the clock through the chunks' stream positions; the start moved to where
  the speech is loud, past VAD's padding), the extent of the audio of a message (turn-based), or,
  where the protocol does not say (full duplex), the stretches where the user's audio is loud
  enough to be speech.
- An assistant turn spans its audio as played (or, without audio, its first to its last event).
  ``latency_s`` is from the end of the user turn before it to its start, as a listener heard it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_GAP_S = 0.6  # quiet stretches shorter than this are one turn (loudness-derived user turns)
_MIN_TURN_S = 0.2


def heard_ends(events: list[dict[str, Any]]) -> None:
    """Give every audio chunk its ``end``: assistant chunks end where a later barge-in cut them."""
    cuts = [(e["t"], e.get("cut_seq", 0)) for e in events if e["type"] == "barge_in"]
    for e in events:
        if e["type"] != "audio":
            continue
        end = e["start"] + e["duration"]
        if e["role"] == "assistant":
            for t, seq in cuts:
                if e["seq"] <= seq and t < end:
                    end = max(e["start"], t)
        e["end"] = round(end, 4)


def _stream_mapper(events: list[dict[str, Any]]) -> Callable[[float], float | None]:
    """Position in the user's live audio stream (ms) -> time on the clock."""
    spans = sorted(
        (e["stream_pos"], e["start"], e["duration"])
        for e in events
        if e["type"] == "audio" and e["role"] == "user" and "stream_pos" in e
    )

    def at(ms: float) -> float | None:
        pos = ms / 1000
        best = None
        for stream_pos, start, duration in spans:
            if stream_pos <= pos:
                best = start + min(pos - stream_pos, duration)
            else:
                break
        return round(best, 4) if best is not None else None

    return at


class _Turn:
    def __init__(self, role: str, t: float, start: float | None = None, ref: str | None = None) -> None:
        self.role, self.t, self.t_end = role, t, t
        self.start: float | None = start
        self.end: float | None = None
        self.ref = ref
        self.finals: list[str] = []
        self.deltas: list[str] = []
        self.clips: list[dict[str, Any]] = []
        self.status = "completed"
        self.interrupted = False
        self.figures: dict[str, Any] = {}
        self.stages: dict[str, float] = {}  # the reply's breakdown (seconds after the speech's end)

    def text(self) -> str:
        if self.finals:
            return " ".join(self.finals).strip()
        return "".join(self.deltas).strip()

    def extent(self) -> tuple[float, float]:
        if self.role == "assistant" and self.clips:
            # a chunk queued to play after the barge-in that cut it was never heard: it does not
            # stretch the turn (a reply paused for speech over it is cut a moment later, its last
            # chunks still queued ahead of real time)
            heard = [c for c in self.clips if c["end"] > c["start"]] or self.clips
            return min(c["start"] for c in heard), max(c["end"] for c in heard)
        start = self.start
        end = self.end
        if self.clips:
            start = min(c["start"] for c in self.clips) if start is None else start
            end = max(c["end"] for c in self.clips) if end is None else end
        start = self.t if start is None else start
        end = max(start, self.t_end if end is None else end)
        return start, end

    def view(self) -> dict[str, Any]:
        start, end = self.extent()
        out: dict[str, Any] = {
            "role": self.role,
            "start": round(start, 3),
            "end": round(end, 3),
            "text": self.text(),
            "status": self.status,
            "interrupted": self.interrupted,
        }
        if self.figures:
            out["figures"] = self.figures
        if self.stages:
            out["stages"] = self.stages
        if self.ref:
            out["ref"] = self.ref
        return out


def build_turns(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns of both speakers, by start time (``heard_ends`` must have run)."""
    at_ms = _stream_mapper(events)
    done: list[_Turn] = []
    user: _Turn | None = None
    reply: _Turn | None = None
    ahead: dict[str, Any] = {}  # figures about the next reply
    protocol_user_turns = any(e["type"] == "turn_start" and e["role"] == "user" for e in events)

    def last(role: str, need_text: bool = False) -> _Turn | None:
        for turn in reversed(done):
            if turn.role == role and not (need_text and turn.finals):
                return turn
        return None

    for e in events:
        kind, t = e["type"], e.get("t", 0.0)
        if kind == "turn_start" and e["role"] == "user":
            if user is not None:
                done.append(user)
            start = at_ms(e["audio_ms"]) if "audio_ms" in e else None
            user = _Turn("user", t, start)
        elif kind == "turn_end" and e["role"] == "user" and user is not None:
            user.end = at_ms(e["audio_ms"]) if "audio_ms" in e else None
            user.t_end = t
            done.append(user)
            user = None
        elif kind == "turn_start":
            if reply is not None:
                done.append(reply)
            reply = _Turn("assistant", t, ref=e.get("ref"))
            reply.figures.update(ahead)
            ahead = {}
        elif kind == "turn_end":
            turn = reply or last("assistant")
            if turn is not None:
                turn.status, turn.t_end = e.get("status", "completed"), t
                if reply is not None:
                    done.append(reply)
                    reply = None
        elif kind == "audio":
            if e["role"] == "user":
                if user is not None and protocol_user_turns:
                    user.clips.append(e)
            else:
                if reply is None:
                    reply = _Turn("assistant", t)
                reply.clips.append(e)
        elif kind == "text":
            if e["role"] == "user":
                target = user or last("user", need_text=e["final"]) or last("user")
            else:
                target = reply or last("assistant")
            if target is not None:
                (target.finals if e["final"] else target.deltas).append(e["text"])
                target.t_end = max(target.t_end, t)
        elif kind == "barge_in":
            turn = reply or last("assistant")
            if turn is not None:
                turn.interrupted = True
        elif kind == "figures":
            if e.get("next_turn"):
                ahead.update(e["values"])
            elif (turn := reply or last("assistant")) is not None:
                turn.figures.update(e["values"])
        elif kind == "stages" and (turn := reply or last("assistant")) is not None:
            turn.stages = dict(e["stages"])
    for turn in (user, reply):
        if turn is not None:
            turn.status = "unfinished"
            done.append(turn)
    loud = _loud_spans(events)
    if protocol_user_turns:
        for turn in done:
            if turn.role == "user" and turn.start is not None:
                _snap(turn, loud)
    else:
        done += _loud_turns(loud)
    turns = sorted((turn.view() for turn in done), key=lambda v: (v["start"], v["role"] != "user"))
    _latencies(turns)
    for i, view in enumerate(turns):
        view["index"] = i
    return turns


def _loud_spans(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """Where the user's live audio is loud enough to be speech, on the clock."""
    return sorted(
        (e["start"] + a, e["start"] + b)
        for e in events
        if e["type"] == "audio" and e["role"] == "user" and "stream_pos" in e
        for a, b in e.get("voiced", [])
    )


def _snap(turn: _Turn, loud: list[tuple[float, float]]) -> None:
    """A turn the protocol placed starts where its speech does: server VAD pads the start
    (``prefix_padding_ms``), and the padding may reach back across a pause in the stream."""
    assert turn.start is not None
    end = turn.end if turn.end is not None else float("inf")
    onset = next((a for a, b in loud if b > turn.start and a < end), None)
    if onset is not None and onset > turn.start:
        turn.start = round(onset, 4)


def _loud_turns(loud: list[tuple[float, float]]) -> list[_Turn]:
    """User turns where the protocol gives none: the loud stretches of the user's live audio."""
    merged: list[list[float]] = []
    for a, b in loud:
        if merged and a - merged[-1][1] < _GAP_S:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    turns = []
    for a, b in merged:
        if b - a >= _MIN_TURN_S:
            turn = _Turn("user", a, a)
            turn.end = b
            turns.append(turn)
    return turns


def _latencies(turns: list[dict[str, Any]]) -> None:
    """Each reply's delay after the user turn it answers (the last user turn that ended before it)."""
    last_user_end: float | None = None
    for turn in turns:
        if turn["role"] == "user":
            last_user_end = turn["end"]
        elif last_user_end is not None and turn["start"] >= last_user_end:
            turn["latency_s"] = round(turn["start"] - last_user_end, 3)
            last_user_end = None
