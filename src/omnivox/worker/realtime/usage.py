"""What a realtime response reports of its cost: ``response.done``'s ``usage`` and ``rate_limits.updated``.

Token counts are the LLM's own where its server reports them (chat completions' ``usage``), else
estimated from the text (about four characters a token). The cascade's LLM reads and writes text, so
audio has no tokens of its own: output audio tokens are estimated from the seconds of speech sent
(``AUDIO_TOKENS_PER_S``, the rate OpenAI's realtime models bill at), and the usage says which
figures are estimates (``omnivox_estimated``). Input audio reaches the LLM as its transcript and is
counted as text.

Rate limits are omnivox's own, per session: one response at a time (``requests``), and the LLM's
history budget (``tokens``: what this response's history and its reserved reply leave of it).
"""

from __future__ import annotations

from typing import Any

from omnivox.protocol.realtime import events as ev
from omnivox.voice.llm.base import Usage
from omnivox.voice.llm.history import approx_tokens, history_tokens
from omnivox.voice.reply import ReplyRequest

AUDIO_TOKENS_PER_S = 20.0


def usage(request: ReplyRequest, text: str, audio_ms: float, reported: Usage | None) -> dict[str, Any]:
    """``response.done``'s ``usage`` for a response that wrote ``text`` and sent ``audio_ms`` of speech."""
    estimated = ["output_token_details.audio_tokens"] if request.speak else []
    input_tokens = reported.input_tokens if reported else None
    if input_tokens is None:
        input_tokens = history_tokens(request.messages)
        estimated.append("input_tokens")
    text_tokens = reported.output_tokens if reported else None
    if text_tokens is None:
        text_tokens = approx_tokens(text)
        estimated.append("output_token_details.text_tokens")
    audio_tokens = round(audio_ms / 1000 * AUDIO_TOKENS_PER_S) if request.speak else 0
    cached = (reported.cached_tokens if reported else None) or 0
    output_tokens = text_tokens + audio_tokens
    return {
        "total_tokens": input_tokens + output_tokens,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "input_token_details": {
            "text_tokens": input_tokens,
            "audio_tokens": 0,
            "image_tokens": 0,
            "cached_tokens": cached,
            "cached_tokens_details": {"text_tokens": cached, "audio_tokens": 0, "image_tokens": 0},
        },
        "output_token_details": {"text_tokens": text_tokens, "audio_tokens": audio_tokens},
        "omnivox_estimated": estimated,
    }


def rate_limits(request: ReplyRequest, context_tokens: int) -> ev.RateLimitsUpdated:
    """At a response's start: this one is the one allowed now, and what the history budget holds."""
    reserved = request.llm.max_tokens or 0
    left = max(0, context_tokens - history_tokens(request.messages) - reserved)
    return ev.RateLimitsUpdated(
        rate_limits=[
            ev.RateLimit(name="requests", limit=1, remaining=0, reset_seconds=0.0),
            ev.RateLimit(name="tokens", limit=context_tokens, remaining=left, reset_seconds=0.0),
        ]
    )
