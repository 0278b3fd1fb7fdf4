"""The OpenAI Realtime API over a phone call, as OpenAI serves SIP calls.

The session takes and speaks G.711 (``audio/pcmu`` or ``audio/pcma``), whatever a sideband's
``session.update`` says. Caller audio is ``input_audio_buffer.append``; a key press becomes
``input_audio_buffer.dtmf_event_received`` for sidebands and a user message in the conversation
("[DTMF 5]"). Playback is reported as on WebRTC (``output_audio_buffer.started/stopped/cleared``),
and what the caller heard of a cut reply is told to the session as a client's
``conversation.item.truncate`` would. The built-in ``end_call`` tool hangs up; ``send_dtmf`` (offered
on SIP calls whose profile asks for it) presses keys, to get through a phone menu: its result comes
back as the function call's output, and no response is asked for (the menu speaks next). The
session is told it is on a telephone line (``omnivox.line: "phone"``, kept through a sideband's
updates as the formats are): the judge of speech over a reply weighs what it does over G.711.
"""

from __future__ import annotations

import json
import time
from typing import Any

from omnivox.core.errors import OmnivoxError
from omnivox.protocol.phone import PhoneBridge, PhoneRoute
from omnivox.protocol.realtime import calls
from omnivox.protocol.realtime.events import error_event

END_CALL = "end_call"
END_CALL_TOOL = {
    "type": "function",
    "name": END_CALL,
    "description": "Hang up the phone call. Call it once the conversation is over and you have said goodbye.",
    "parameters": {"type": "object", "properties": {"reason": {"type": "string"}}},
}
PHONE_LINE = "phone"  # ``OmnivoxOptions.line`` of every phone call's session
SEND_DTMF = "send_dtmf"
SEND_DTMF_TOOL = {
    "type": "function",
    "name": SEND_DTMF,
    "description": "Press keys on the phone's keypad, as a person would to choose from a phone menu.",
    "parameters": {
        "type": "object",
        "properties": {
            "digits": {"type": "string", "description": "the keys to press, in order: 0-9, * and #"}
        },
        "required": ["digits"],
    },
}


class RealtimePhone(PhoneBridge):
    def preamble(
        self, session: dict[str, Any] | None, encoding: str, end_call: bool, send_dtmf: bool = False
    ) -> list[str]:
        patch = _on_phone_line(
            calls.fixed_formats({"type": "realtime", **(session or {})}, {"type": encoding})
        )
        builtin = [t for on, t in ((end_call, END_CALL_TOOL), (send_dtmf, SEND_DTMF_TOOL)) if on]
        if builtin:
            names = {t["name"] for t in builtin}
            tools = [
                t for t in patch.get("tools") or [] if not (isinstance(t, dict) and t.get("name") in names)
            ]
            patch["tools"] = [*tools, *builtin]
        return [json.dumps({"type": "session.update", "event_id": "omnivox_phone", "session": patch})]

    def profile_session(
        self,
        instructions: str | None,
        voice: str | None,
        tools: list[dict[str, Any]],
        turn_detection: dict[str, Any] | None,
    ) -> dict[str, Any]:
        session: dict[str, Any] = {}
        if instructions is not None:
            session["instructions"] = instructions
        if tools:
            session["tools"] = tools
        audio: dict[str, Any] = {}
        if voice is not None:
            audio["output"] = {"voice": voice}
        if turn_detection is not None:
            audio["input"] = {"turn_detection": turn_detection}
        if audio:
            session["audio"] = audio
        return session

    def audio_in(self, payload: bytes) -> str:
        return calls.append(payload)

    def client_frame(self, frame: str, encoding: str) -> str | None:
        return calls.with_fixed_formats(frame, {"type": encoding}, _on_phone_line)

    def route(self, frame: str) -> PhoneRoute:
        try:
            event = json.loads(frame)
        except (ValueError, RecursionError):  # (the worker's frames: passed on as they are)
            return PhoneRoute(event=frame)
        kind = event.get("type") if isinstance(event, dict) else None
        if kind in calls.AUDIO_DELTAS:
            return PhoneRoute(audio=calls.delta_audio(event), response_id=event.get("response_id"))
        if kind == "response.done":
            response = event.get("response") or {}
            cancelled = response.get("status") == "cancelled"
            return PhoneRoute(event=frame, response_id=response.get("id"), audio_over=True, clear=cancelled)
        if kind == "response.output_item.added":
            item = event.get("item") or {}
            if item.get("type") == "message" and event.get("response_id") and item.get("id"):
                return PhoneRoute(event=frame, item=(event["response_id"], item["id"]))
        if kind == "omnivox.interruption.paused":
            return PhoneRoute(event=frame, pause=True, response_id=event.get("response_id"))
        if kind == "omnivox.interruption.resumed":
            return PhoneRoute(event=frame, resume=True, response_id=event.get("response_id"))
        if kind == "conversation.item.truncated" and isinstance(event.get("audio_end_ms"), int):
            return PhoneRoute(
                event=frame, clear=True, truncated=(event.get("item_id", ""), event["audio_end_ms"])
            )
        if kind == "output_audio_buffer.cleared":
            return PhoneRoute(
                event=frame, response_id=event.get("response_id"), clear=True, cleared_event=True
            )
        if kind == "response.function_call_arguments.done" and event.get("name") == END_CALL:
            return PhoneRoute(event=frame, hang_up=True)
        if kind == "response.function_call_arguments.done" and event.get("name") == SEND_DTMF:
            return PhoneRoute(
                event=frame, keys=(str(event.get("call_id") or ""), _digits(event.get("arguments")))
            )
        if kind == "input_audio_buffer.speech_started":
            return PhoneRoute(event=frame, caller_spoke=True)
        return PhoneRoute(event=frame)

    def playback(self, kind: str, response_id: str) -> str:
        return calls.playback(kind, response_id)

    def playback_report(self, kind: str, response_id: str) -> str | None:
        return calls.playback_report(kind, response_id)

    def heard(self, item_id: str, audio_end_ms: int) -> str:
        truncate = {"type": "conversation.item.truncate", "event_id": "omnivox_heard"}
        return json.dumps({**truncate, "item_id": item_id, "content_index": 0, "audio_end_ms": audio_end_ms})

    def dtmf(self, digit: str) -> tuple[list[str], str]:
        item = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": f"[DTMF {digit}]"}],
        }
        frames = [json.dumps({"type": "conversation.item.create", "event_id": "omnivox_dtmf", "item": item})]
        event = {
            "type": "input_audio_buffer.dtmf_event_received",
            "event_id": f"event_dtmf_{time.monotonic_ns()}",
            "event": digit,
            "received_at": int(time.time()),
        }
        return frames, json.dumps(event)

    def tool_output(self, call_id: str, output: dict[str, Any]) -> str:
        item = {"type": "function_call_output", "call_id": call_id, "output": json.dumps(output)}
        return json.dumps({"type": "conversation.item.create", "event_id": "omnivox_tool", "item": item})

    def greeting(self, instructions: str) -> str:
        return json.dumps(
            {
                "type": "response.create",
                "event_id": "omnivox_greeting",
                "response": {"instructions": instructions},
            }
        )

    def failure(self, err: OmnivoxError) -> str:
        event = error_event(err).model_dump(mode="json")
        event["error"].update({k: v for k, v in err.details.items() if k != "param"})  # outcome, sip_status
        return json.dumps(event)


def _digits(arguments: Any) -> str:
    """The ``digits`` of a send_dtmf call's JSON arguments ("" when there are none to read)."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else None
    except (ValueError, RecursionError):
        return ""
    digits = args.get("digits") if isinstance(args, dict) else None
    return digits if isinstance(digits, str) else ""


REALTIME_PHONE = RealtimePhone()


def _on_phone_line(session: dict[str, Any]) -> dict[str, Any]:
    """``session`` (a session update's) saying the session is on a telephone line (options that are
    not an object go on as they are: the worker says what is wrong with them)."""
    options = session.get("omnivox") or {}
    if not isinstance(options, dict):
        return session
    return {**session, "omnivox": {**options, "line": PHONE_LINE}}
