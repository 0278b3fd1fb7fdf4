"""The wire side of one realtime response: what it was asked, what it reports, its ``response`` object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omnivox.agent.events import ReplyFigures
from omnivox.voice.llm.base import Usage
from omnivox.voice.reply import ReplyRequest
from omnivox.worker.realtime.conversation import Item
from omnivox.worker.realtime.server_tools import ResponseTools
from omnivox.worker.realtime.usage import usage


@dataclass
class ResponsePlan:
    response_id: str
    item: Item  # the assistant item this response fills
    request: ReplyRequest  # what the engine is asked (messages, LLM parameters, voice)
    in_conversation: bool = True  # False: an out-of-band response ("conversation": "none")
    metadata: dict[str, str] | None = None
    context_tokens: int = 0  # the LLM's history budget (reported in rate_limits.updated)
    tools: ResponseTools | None = None  # the calls the server handles (MCP tools, async functions)

    @property
    def audio(self) -> bool:
        return self.request.speak


def response_object(
    p: ResponsePlan,
    figures: ReplyFigures,
    status: str,
    outputs: list[Item],
    audio_ms: float,
    reported: Usage | None,
) -> dict[str, Any]:
    """The wire ``response`` object of a response in ``status``: ``outputs`` its items in the order
    they opened, ``audio_ms`` the audio it sent, ``reported`` the LLM's own token counts (if any)."""
    response: dict[str, Any] = {
        "id": p.response_id,
        "object": "realtime.response",
        "status": status,
        "conversation_id": "conv_default" if p.in_conversation else None,
        "output_modalities": ["audio"] if p.audio else ["text"],
        "audio": {"output": {"voice": p.request.voice}},
        "max_output_tokens": p.request.llm.max_tokens or "inf",
        "metadata": p.metadata,
        "output": [i.wire() for i in outputs] if status != "in_progress" else [],
    }
    if status in ("cancelled", "failed", "incomplete"):
        details: dict[str, Any] = {"type": status, "reason": figures.reason}
        if figures.error is not None:
            details["error"] = {
                "type": "server_error",
                "code": figures.error.wire_code,
                "message": figures.error.message,
            }
        response["status_details"] = details
    if status != "in_progress":
        written = p.item.text + "".join(c.arguments for c in outputs if c.type == "function_call")
        response["usage"] = usage(p.request, written, audio_ms, reported)
    return response
