"""The wire ``response`` object of a realtime response, for each status: what it names, its
``status_details``, its outputs and its ``usage``."""

from __future__ import annotations

import pytest

from omnivox.agent.events import ReplyFigures as Figures
from omnivox.core.errors import InvalidJson, OmnivoxError
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import LlmParams, Usage
from omnivox.voice.llm.history import history_tokens
from omnivox.voice.reply import ReplyRequest
from omnivox.worker.realtime.conversation import Item
from omnivox.worker.realtime.response_wire import ResponsePlan, response_object
from omnivox.worker.realtime.usage import AUDIO_TOKENS_PER_S

MESSAGES = [ChatMessage(role="system", content="be brief"), ChatMessage(role="user", content="hello there")]


def plan(
    *,
    speak: bool = True,
    voice: str | None = "alloy",
    max_tokens: int | None = None,
    in_conversation: bool = True,
    metadata: dict[str, str] | None = None,
    text: str = "",
) -> ResponsePlan:
    item = Item("assistant", speak, text=text, id="item_1")
    llm = LlmParams(max_tokens=max_tokens)
    request = ReplyRequest(messages=list(MESSAGES), llm=llm, speak=speak, voice=voice)
    return ResponsePlan("resp_1", item, request, in_conversation=in_conversation, metadata=metadata)


def obj(p: ResponsePlan, status: str, outputs: list[Item] | None = None, **kw) -> dict:
    figures = kw.pop("figures", Figures())
    items = [p.item] if outputs is None else outputs
    return response_object(p, figures, status, items, kw.pop("audio_ms", 0.0), kw.pop("reported", None))


def test_the_plan_is_audio_when_the_request_speaks():
    assert plan(speak=True).audio
    assert not plan(speak=False).audio


def test_a_plan_defaults():
    p = plan()
    assert p.in_conversation and p.metadata is None and p.context_tokens == 0


def test_figures_default_to_nothing_reported():
    f = Figures()
    assert f.reason is None and f.error is None
    assert f.llm_ttft_s is None and f.tts_ttfa_s is None and f.voice_to_voice_s is None
    assert f.tts_busy_s == 0.0 and f.tts_audio_s == 0.0


def test_in_progress_has_no_outputs_usage_or_details():
    r = obj(plan(), "in_progress")
    assert r["id"] == "resp_1"
    assert r["object"] == "realtime.response"
    assert r["status"] == "in_progress"
    assert r["output"] == []
    assert "usage" not in r and "status_details" not in r


def test_completed_lists_its_outputs_and_usage_but_no_details():
    p = plan(text="hi!")
    r = obj(p, "completed", audio_ms=1000)
    assert r["status"] == "completed"
    assert r["output"] == [p.item.wire()]
    assert r["output"][0]["content"] == [{"type": "output_audio", "transcript": "hi!"}]
    assert "status_details" not in r
    assert r["usage"]["output_token_details"]["audio_tokens"] == AUDIO_TOKENS_PER_S


@pytest.mark.parametrize("status", ["cancelled", "failed", "incomplete"])
def test_an_unfinished_status_has_details_of_its_type_and_reason(status):
    r = obj(plan(), status, figures=Figures(reason="turn_detected"))
    assert r["status_details"] == {"type": status, "reason": "turn_detected"}
    assert "usage" in r
    assert [o["id"] for o in r["output"]] == ["item_1"]


def test_details_without_a_reason_carry_none():
    r = obj(plan(), "cancelled")
    assert r["status_details"] == {"type": "cancelled", "reason": None}


def test_a_failed_response_names_its_error_by_its_realtime_code():
    r = obj(plan(), "failed", figures=Figures(error=InvalidJson("bad json")))
    assert r["status_details"]["error"] == {
        "type": "server_error",
        "code": "invalid_event",
        "message": "bad json",
    }


def test_an_error_without_a_realtime_code_uses_its_own_code():
    r = obj(plan(), "failed", figures=Figures(error=OmnivoxError("boom")))
    assert r["status_details"]["error"]["code"] == "internal_error"
    assert r["status_details"]["error"]["message"] == "boom"


def test_an_error_on_a_completed_response_is_not_reported():
    r = obj(plan(), "completed", figures=Figures(error=OmnivoxError("boom"), reason="x"))
    assert "status_details" not in r


def test_conversation_id_is_none_out_of_band():
    assert obj(plan(), "completed")["conversation_id"] == "conv_default"
    assert obj(plan(in_conversation=False), "completed")["conversation_id"] is None


def test_modalities_follow_speaking():
    assert obj(plan(speak=True), "completed")["output_modalities"] == ["audio"]
    assert obj(plan(speak=False), "completed")["output_modalities"] == ["text"]


def test_the_voice_is_reported_even_when_none():
    assert obj(plan(voice="verse"), "in_progress")["audio"] == {"output": {"voice": "verse"}}
    assert obj(plan(voice=None), "in_progress")["audio"] == {"output": {"voice": None}}


def test_max_output_tokens_is_inf_without_a_limit():
    assert obj(plan(), "in_progress")["max_output_tokens"] == "inf"
    assert obj(plan(max_tokens=0), "in_progress")["max_output_tokens"] == "inf"
    assert obj(plan(max_tokens=256), "in_progress")["max_output_tokens"] == 256


def test_metadata_is_passed_through():
    assert obj(plan(metadata={"k": "v"}), "completed")["metadata"] == {"k": "v"}
    assert obj(plan(), "completed")["metadata"] is None


def test_outputs_keep_their_order_and_shapes():
    p = plan(speak=False, text="calling")
    call = Item.call("call_1", "get_weather", '{"city": "Paris"}', id="item_2")
    r = obj(p, "completed", outputs=[call, p.item])
    assert [o["id"] for o in r["output"]] == ["item_2", "item_1"]
    assert r["output"][0] == {
        "id": "item_2",
        "object": "realtime.item",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    assert r["output"][1]["content"] == [{"type": "output_text", "text": "calling"}]


def test_a_response_with_no_outputs_lists_none():
    assert obj(plan(), "completed", outputs=[])["output"] == []


def test_usage_counts_the_text_and_the_call_arguments_written():
    p = plan(speak=False, text="abcd")  # one token
    call = Item.call("c", "f", "x" * 8)  # two tokens
    r = obj(p, "completed", outputs=[p.item, call])
    u = r["usage"]
    assert u["output_tokens"] == 3
    assert u["output_token_details"] == {"text_tokens": 3, "audio_tokens": 0}
    assert u["input_tokens"] == history_tokens(MESSAGES)
    assert u["total_tokens"] == u["input_tokens"] + 3
    assert u["omnivox_estimated"] == ["input_tokens", "output_token_details.text_tokens"]


def test_usage_counts_only_function_call_outputs_arguments():
    p = plan(speak=False, text="")
    other = Item.call_output("c", "a long function output that was not written by the model")
    r = obj(p, "completed", outputs=[other])
    assert r["usage"]["output_tokens"] == 0


def test_usage_takes_the_llms_own_counts():
    p = plan(speak=True, text="whatever")
    r = obj(p, "completed", audio_ms=2500, reported=Usage(input_tokens=40, output_tokens=7, cached_tokens=16))
    u = r["usage"]
    assert u["input_tokens"] == 40
    assert u["output_token_details"] == {"text_tokens": 7, "audio_tokens": 50}
    assert u["output_tokens"] == 57 and u["total_tokens"] == 97
    assert u["input_token_details"]["cached_tokens"] == 16
    assert u["input_token_details"]["cached_tokens_details"]["text_tokens"] == 16
    assert u["omnivox_estimated"] == ["output_token_details.audio_tokens"]


def test_usage_with_a_partial_report_estimates_the_rest():
    p = plan(speak=False, text="abcdefgh")
    u = obj(p, "cancelled", reported=Usage(output_tokens=5))["usage"]
    assert u["output_tokens"] == 5
    assert u["input_tokens"] == history_tokens(MESSAGES)
    assert u["omnivox_estimated"] == ["input_tokens"]
    assert u["input_token_details"]["cached_tokens"] == 0


def test_a_text_response_has_no_audio_tokens_whatever_audio_is_counted():
    u = obj(plan(speak=False), "completed", audio_ms=5000)["usage"]
    assert u["output_token_details"]["audio_tokens"] == 0


def test_audio_tokens_round_the_seconds_sent():
    u = obj(plan(speak=True), "completed", audio_ms=1234)["usage"]
    assert u["output_token_details"]["audio_tokens"] == round(1.234 * AUDIO_TOKENS_PER_S)
