"""Conversation content shared by the streaming and duplex protocols and the engines.

A message's content is a string or a list of parts: text, audio (base64 PCM16 mono or WAV, 16 kHz
unless ``sample_rate`` says otherwise) and image (base64 PNG/JPEG).
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TextPart(_Part):
    type: Literal["text"] = "text"
    text: str


class AudioPart(_Part):
    type: Literal["audio"] = "audio"
    data: str = Field(description="base64 audio")
    format: Literal["pcm16", "wav", "float32"] = "pcm16"
    sample_rate: int = Field(16000, ge=8000, le=48000)


class ImagePart(_Part):
    type: Literal["image"] = "image"
    data: str = Field(description="base64 PNG or JPEG")


Part = Annotated[TextPart | AudioPart | ImagePart, Field(discriminator="type")]


class ToolCall(BaseModel):
    """A function the assistant called (OpenAI chat completions' ``tool_calls`` entry, flattened)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    name: str
    arguments: str = ""  # JSON text, as the model wrote it


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[Part]
    tool_calls: list[ToolCall] | None = None  # assistant: the functions it called
    tool_call_id: str | None = None  # tool: the call this message answers

    def text(self) -> str:
        """The text of the message (audio and image parts contribute nothing)."""
        if isinstance(self.content, str):
            return self.content
        return " ".join(p.text for p in self.content if isinstance(p, TextPart))

    def canonical(self) -> str | list[dict[str, Any]]:
        """Content in a canonical form: a list of only text parts is the same as the joined string."""
        if isinstance(self.content, str):
            return self.content
        texts = [p.text for p in self.content if isinstance(p, TextPart)]
        if len(texts) == len(self.content):
            return "".join(texts)
        return [p.model_dump(mode="json") for p in self.content]


def history_hash(messages: list[ChatMessage]) -> str | None:
    """SHA-256 over canonical role + content of ``messages``; ``None`` for an empty history."""
    if not messages:
        return None
    canon: list[dict[str, object]] = []
    for m in messages:
        entry: dict[str, object] = {"role": m.role, "content": m.canonical()}
        if m.tool_calls:  # only when present: hashes of plain conversations stay as they were
            entry["tool_calls"] = [c.model_dump() for c in m.tool_calls]
        if m.tool_call_id:
            entry["tool_call_id"] = m.tool_call_id
        canon.append(entry)
    blob = json.dumps(canon, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()
