"""How a turn-based streaming session reads as a timeline (see ``protocol.timelines.reader``).

Each ``prefill`` carries the whole conversation, so only what is new in it is the user's turn: the
messages past what the previous prefill held (on the first prefill, those after the last assistant
message: the client may bring an earlier conversation along). Audio parts are whole recordings
(clips), sent when they were over. The reply streams as ``chunk`` messages (text deltas and PCM16
speech) and ends with ``done``; a ``stop`` while it streams cuts it off.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from omnivox.protocol.timelines.reader import (
    AssistantCutOff,
    Audio,
    Config,
    Event,
    Image,
    Marker,
    Text,
    TimelineReader,
    TurnEnd,
    TurnFigures,
    TurnStart,
    b64,
    error_event,
    record_choice,
)

OUTPUT_RATE = 24000


def _fingerprint(message: object) -> str:
    blob = json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha1(blob.encode(), usedforsecurity=False).hexdigest()


class StreamingTimeline(TimelineReader):
    def __init__(self) -> None:
        self._held: list[str] | None = None  # fingerprints of the conversation the last prefill carried
        self._speaking = False  # a reply is streaming

    # ---- client

    def client(self, kind: str, msg: dict[str, Any]) -> list[Event]:
        if kind == "prefill":
            return self._prefill(msg)
        if kind == "generate":
            return [Marker("generate", {"generate_audio": bool(msg.get("generate_audio"))})]
        if kind == "stop":
            return [AssistantCutOff("client_stopped")] if self._speaking else [Marker("stop")]
        return []

    def _prefill(self, msg: dict[str, Any]) -> list[Event]:
        events: list[Event] = record_choice(msg.get("record"))
        messages = [m for m in msg["messages"] if isinstance(m, dict)]
        prints = [_fingerprint(m) for m in messages]
        if self._held is None:
            assistant = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
            new = messages[assistant[-1] + 1 :] if assistant else messages
        else:
            common = 0
            while common < min(len(prints), len(self._held)) and prints[common] == self._held[common]:
                common += 1
            new = messages[common:]
        self._held = prints
        for message in new:
            events += self._message(message)
        return events

    def _message(self, message: dict[str, Any]) -> list[Event]:
        role, content = message.get("role"), message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(parts, list):
            return []
        if role == "system":
            texts = [p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
            text = " ".join(t for t in texts if isinstance(t, str))
            return [Config({"system_prompt": text})]
        if role != "user":
            return []
        events: list[Event] = [TurnStart("user")]
        for part in parts:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                events.append(Text("user", part["text"], final=True, source="typed"))
            elif part.get("type") == "audio":
                fmt = part.get("format", "pcm16")
                if fmt in ("pcm16", "wav", "float32"):
                    rate = int(part.get("sample_rate") or 16000)
                    events.append(Audio("user", b64(part["data"]), fmt, rate, clip=True))
            elif part.get("type") == "image":
                events.append(Image(b64(part["data"]), "image"))
        events.append(TurnEnd("user"))
        return events

    # ---- server

    def server(self, kind: str, msg: dict[str, Any]) -> list[Event]:
        if kind == "prefill_done":
            events: list[Event] = []
            if isinstance(msg.get("transcript"), str) and msg["transcript"]:
                events.append(Text("user", msg["transcript"], final=True, source="asr"))
            figures: dict[str, float | int | bool] = {
                k: msg[k] for k in ("cache_hit", "cached_tokens", "input_tokens") if k in msg
            }
            return [*events, TurnFigures(figures, next_turn=True)] if figures else events
        if kind == "chunk":
            return self._chunk(msg)
        if kind == "done":
            return self._done(msg)
        if kind == "error":
            return error_event(msg)
        return []

    def _chunk(self, msg: dict[str, Any]) -> list[Event]:
        events: list[Event] = [] if self._speaking else [TurnStart("assistant")]
        self._speaking = True
        if msg.get("text_delta"):
            events.append(Text("assistant", str(msg["text_delta"]), final=False))
        if msg.get("audio_data"):
            rate = int(msg.get("audio_sample_rate") or OUTPUT_RATE)
            events.append(Audio("assistant", b64(msg["audio_data"]), "pcm16", rate))
        return events

    def _done(self, msg: dict[str, Any]) -> list[Event]:
        events: list[Event] = [] if self._speaking else [TurnStart("assistant")]
        self._speaking = False
        if msg.get("text"):
            events.append(Text("assistant", str(msg["text"]), final=True))
        figures: dict[str, float | int | bool] = {}
        if isinstance(msg.get("ttft_ms"), int | float):
            figures["ttft_s"] = msg["ttft_ms"] / 1000
        if isinstance(msg.get("elapsed_ms"), int | float):
            figures["elapsed_s"] = msg["elapsed_ms"] / 1000
        if figures:
            events.append(TurnFigures(figures))
        status = "failed" if msg.get("error") else "stopped" if msg.get("stopped") else "completed"
        events.append(TurnEnd("assistant", status=status))
        return events
