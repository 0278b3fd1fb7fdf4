"""How a realtime session (the OpenAI Realtime API) reads as a timeline (see ``protocol.timelines.reader``).

The user's audio is ``input_audio_buffer.append`` in the session's input format and the assistant's
is ``response.output_audio.delta`` in its output format; both formats are taken from what the worker
says is in effect (``session.created`` / ``session.updated``), never from what a client asked for.
Server VAD says where the user's turns are (``speech_started`` / ``speech_stopped``, positions in the
user's audio stream); a response is the assistant's turn, and one cancelled because the user spoke
(``turn_detected``) is a barge-in; a reply paused for speech over it and played on
(``omnivox.interruption.paused`` / ``.resumed``) is marked, not cut; each judgement of such speech
(``omnivox.interruption.judged``: its verdict, the words and the evidence) is marked too. Beta
event names read as their GA names. ``session.record`` (an omnivox extension of
``session.update``) is the client's recording choice.
"""

from __future__ import annotations

from typing import Any

from omnivox.protocol.realtime.events import ga_type
from omnivox.protocol.timelines.reader import (
    AssistantCutOff,
    Audio,
    AudioEncoding,
    Config,
    Event,
    Image,
    Marker,
    Text,
    TimelineReader,
    TurnEnd,
    TurnStart,
    b64,
    data_url_bytes,
    dict_field,
    error_event,
    record_choice,
)

_ENCODINGS: dict[str, tuple[AudioEncoding, int | None]] = {
    "audio/pcm": ("pcm16", None),
    "audio/pcmu": ("pcmu", 8000),
    "audio/pcma": ("pcma", 8000),
    "audio/opus": ("ogg_opus", 24000),
}
_CLIENT_MARKERS = {
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "response.create",
    "response.cancel",
    "output_audio_buffer.clear",
}
_TEXT_DELTAS = ("response.output_audio_transcript.delta", "response.output_text.delta")
_INTERRUPTION = {
    "omnivox.interruption.paused": "paused",
    "omnivox.interruption.judged": "judged",  # each decision, with its reason and evidence
    "omnivox.interruption.resumed": "resumed",
}
_TEXT_DONE = {"response.output_audio_transcript.done": "transcript", "response.output_text.done": "text"}


def _format(fmt: object) -> tuple[AudioEncoding, int]:
    if not isinstance(fmt, dict):
        return "pcm16", 24000
    encoding, fixed = _ENCODINGS.get(str(fmt.get("type")), ("pcm16", None))
    rate = fixed or fmt.get("rate") or 24000
    return encoding, int(rate)


class RealtimeTimeline(TimelineReader):
    def __init__(self) -> None:
        self._in: tuple[AudioEncoding, int] = ("pcm16", 24000)
        self._out: tuple[AudioEncoding, int] = ("pcm16", 24000)
        self._input_stream = 0  # a new input format starts a new stream (Ogg-Opus decoder state)

    # ---- client

    def client(self, kind: str, msg: dict[str, Any]) -> list[Event]:
        if kind == "input_audio_buffer.append":
            encoding, rate = self._in
            return [Audio("user", b64(msg["audio"]), encoding, rate, stream=f"in{self._input_stream}")]
        if kind in ("session.update", "transcription_session.update"):
            session = msg.get("session")
            return record_choice(session.get("record")) if isinstance(session, dict) else []
        if kind == "conversation.item.create":
            return self._item(msg.get("item"))
        if kind in _CLIENT_MARKERS:
            return [Marker(kind)]
        if kind == "conversation.item.truncate":
            return [Marker(kind, {"audio_end_ms": msg.get("audio_end_ms")})]
        if kind == "omnivox.output_audio_buffer.report":  # the caller's player: a reply began or ended
            return [Marker(kind, {"response_id": msg.get("response_id"), "state": msg.get("state")})]
        return []

    def _item(self, item: object) -> list[Event]:
        """A message the client adds: typed text and images (and audio) of the user."""
        if not isinstance(item, dict) or item.get("role") != "user":
            return []
        events: list[Event] = [TurnStart("user")]
        for part in item.get("content") or []:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "input_text" and isinstance(part.get("text"), str):
                events.append(Text("user", part["text"], final=True, source="typed"))
            elif part.get("type") == "input_image" and (image := data_url_bytes(part.get("image_url"))):
                events.append(Image(image, "image"))
            elif part.get("type") == "input_audio" and isinstance(part.get("audio"), str):
                encoding, rate = self._in
                events.append(Audio("user", b64(part["audio"]), encoding, rate, stream="item", clip=True))
        return [*events, TurnEnd("user")]

    # ---- server

    def server(self, kind: str, msg: dict[str, Any]) -> list[Event]:
        kind = ga_type(kind)
        if kind == "response.output_audio.delta":
            encoding, rate = self._out
            return [Audio("assistant", b64(msg["delta"]), encoding, rate, stream=str(msg.get("response_id")))]
        if kind in _TEXT_DELTAS:
            return [Text("assistant", str(msg["delta"]), final=False)]
        if kind in _TEXT_DONE:
            return [Text("assistant", str(msg[_TEXT_DONE[kind]]), final=True)]
        if kind == "conversation.item.input_audio_transcription.delta":
            return [Text("user", str(msg["delta"]), final=False, source="asr")]
        if kind == "conversation.item.input_audio_transcription.completed":
            return [Text("user", str(msg["transcript"]), final=True, source="asr")]
        if kind == "input_audio_buffer.speech_started":
            return [TurnStart("user", audio_ms=float(msg["audio_start_ms"]))]
        if kind == "input_audio_buffer.speech_stopped":
            return [TurnEnd("user", audio_ms=float(msg["audio_end_ms"]))]
        if kind == "response.created":
            return [TurnStart("assistant", ref=str(msg["response"].get("id")))]
        if kind == "response.done":
            return self._done(msg["response"])
        if kind in ("session.created", "session.updated"):
            return self._session(msg["session"])
        if kind == "conversation.item.truncated":
            heard = {"item_id": msg.get("item_id"), "audio_end_ms": msg.get("audio_end_ms")}
            return [Marker("truncated", heard)]
        if kind in _INTERRUPTION:  # speech over the reply paused it; it played on (not a barge-in)
            keep = (
                "response_id",
                "item_id",
                "audio_end_ms",
                "audio_start_ms",
                "reason",
                "verdict",
                "action",
                "text",
                "evidence",
            )
            return [Marker(_INTERRUPTION[kind], {k: msg[k] for k in keep if k in msg})]
        if kind == "error":
            return error_event(msg)
        return []

    def _done(self, response: dict[str, Any]) -> list[Event]:
        status = str(response.get("status") or "completed")
        details = dict_field(response, "status_details")
        events: list[Event] = []
        if status == "cancelled" and details.get("reason") == "turn_detected":
            events.append(AssistantCutOff("turn_detected"))
        elif status == "cancelled":
            events.append(AssistantCutOff(str(details.get("reason") or "cancelled")))
        return [*events, TurnEnd("assistant", status=status)]

    def _session(self, session: dict[str, Any]) -> list[Event]:
        audio = dict_field(session, "audio")
        inp, out = dict_field(audio, "input"), dict_field(audio, "output")
        new_in = _format(inp.get("format"))
        if new_in != self._in:
            self._in, self._input_stream = new_in, self._input_stream + 1
        self._out = _format(out.get("format"))
        keep = ("model", "instructions", "output_modalities", "audio")
        return [Config({"session": {k: session[k] for k in keep if k in session}})]
