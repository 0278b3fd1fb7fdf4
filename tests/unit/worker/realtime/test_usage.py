"""A realtime response's usage (reported counts where the LLM gave them, estimates marked where not)
and the rate limits said at its start."""

from __future__ import annotations

from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import LlmParams, Usage
from omnivox.voice.reply import ReplyRequest
from omnivox.worker.realtime.usage import AUDIO_TOKENS_PER_S, rate_limits, usage

# 40 characters = 10 tokens, plus 4 for the message's template: 14 tokens
HISTORY = [ChatMessage(role="user", content="x" * 40)]


def request(speak: bool = True, max_tokens: int | None = None) -> ReplyRequest:
    return ReplyRequest(messages=list(HISTORY), llm=LlmParams(max_tokens=max_tokens), speak=speak)


def test_everything_estimated_when_the_llm_reports_nothing():
    u = usage(request(), "y" * 21, audio_ms=2500, reported=None)
    assert u["input_tokens"] == 14
    assert u["output_token_details"] == {"text_tokens": 6, "audio_tokens": 50}  # ceil(21/4); 2.5 s * 20
    assert u["output_tokens"] == 56 and u["total_tokens"] == 70
    assert u["omnivox_estimated"] == [
        "output_token_details.audio_tokens",
        "input_tokens",
        "output_token_details.text_tokens",
    ]


def test_reported_counts_are_used_as_they_are():
    u = usage(request(), "ignored text", audio_ms=1000, reported=Usage(120, 30, 100))
    assert u["input_tokens"] == 120 and u["output_token_details"]["text_tokens"] == 30
    assert u["output_token_details"]["audio_tokens"] == AUDIO_TOKENS_PER_S
    assert u["total_tokens"] == 120 + 30 + 20
    assert u["omnivox_estimated"] == ["output_token_details.audio_tokens"]  # audio is never reported
    details = u["input_token_details"]
    assert details["cached_tokens"] == 100 and details["cached_tokens_details"]["text_tokens"] == 100
    assert details["text_tokens"] == 120 and details["audio_tokens"] == details["image_tokens"] == 0


def test_a_text_only_response_has_no_audio_tokens_and_estimates_none_of_them():
    u = usage(request(speak=False), "abcd", audio_ms=0, reported=Usage(10, 1, None))
    assert u["output_token_details"]["audio_tokens"] == 0 and u["omnivox_estimated"] == []
    assert u["input_token_details"]["cached_tokens"] == 0 and u["total_tokens"] == 11


def test_partly_reported_usage_fills_in_what_is_missing():
    u = usage(request(speak=False), "z" * 8, audio_ms=0, reported=Usage(input_tokens=None, output_tokens=7))
    assert u["input_tokens"] == 14 and u["output_token_details"]["text_tokens"] == 7
    assert u["omnivox_estimated"] == ["input_tokens"]


def test_audio_tokens_are_rounded_seconds_at_the_billing_rate():
    assert usage(request(), "", audio_ms=1024, reported=None)["output_token_details"]["audio_tokens"] == 20
    assert usage(request(), "", audio_ms=1030, reported=None)["output_token_details"]["audio_tokens"] == 21
    assert usage(request(), "", audio_ms=0, reported=None)["output_token_details"]["audio_tokens"] == 0


def test_an_empty_reply_has_no_text_tokens():
    u = usage(request(speak=False), "", audio_ms=0, reported=None)
    assert u["output_tokens"] == 0 and u["total_tokens"] == u["input_tokens"]


def test_rate_limits_say_one_request_and_the_history_budget_left():
    limits = rate_limits(request(max_tokens=100), context_tokens=1000)
    assert limits.type == "rate_limits.updated"
    requests, tokens = limits.rate_limits
    assert (requests.name, requests.limit, requests.remaining, requests.reset_seconds) == (
        "requests",
        1,
        0,
        0.0,
    )
    assert (tokens.name, tokens.limit, tokens.remaining) == ("tokens", 1000, 1000 - 14 - 100)


def test_rate_limits_never_go_below_zero():
    limits = rate_limits(request(max_tokens=5000), context_tokens=1000)
    assert limits.rate_limits[1].remaining == 0


def test_rate_limits_without_a_reply_limit_reserve_nothing():
    assert rate_limits(request(), context_tokens=500).rate_limits[1].remaining == 500 - 14
