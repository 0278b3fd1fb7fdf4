"""Which voice models the settings choose, their budgets, the model packages they need, and where a
prefill goes."""

from __future__ import annotations

import pytest

from omnivox.core.config import Settings
from omnivox.protocol.chat import ChatMessage
from omnivox.voice import stack
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.echo_llm import EchoLlm
from omnivox.voice.packaged import (
    SMART_TURN_V3_ONNX,
    SMOLLM2_135M_GGUF,
    WHISPER_TINY_EN_CT2,
    MissingModelPackage,
    PackagedModel,
)
from omnivox.voice.reply import ReplyRequest
from omnivox.voice.stack import VoiceStack

ABSENT = PackagedModel("a test model", "omnivox-no-such-package", "x/model.gguf", "pip install x==1", "MIT")


def test_the_default_is_the_embedded_conversation():
    s = Settings()
    assert stack.llm_kind(s) == "local" and s.asr == "whisper"
    assert stack.required_models(s) == [SMART_TURN_V3_ONNX, WHISPER_TINY_EN_CT2, SMOLLM2_135M_GGUF]
    assert stack.missing_models(s) == []  # make install put them all here
    # the 135M model gets short replies and a small history; a remote server the generous defaults
    assert (stack.context_tokens(s), stack.max_reply_tokens(s)) == (2048, 80)
    remote = Settings(llm_url="http://llm:8000/v1")
    assert stack.llm_kind(remote) == "openai" and stack.required_models(remote)[-1] is WHISPER_TINY_EN_CT2
    assert (stack.context_tokens(remote), stack.max_reply_tokens(remote)) == (8192, 512)
    assert stack.max_reply_tokens(Settings(llm_max_tokens=33)) == 33


def test_echo_and_pocketsphinx_need_only_the_end_of_turn_model():
    assert stack.required_models(Settings(llm="echo", asr="pocketsphinx")) == [SMART_TURN_V3_ONNX]


def test_a_missing_package_is_reported_not_replaced(monkeypatch):
    monkeypatch.setattr(stack, "SMOLLM2_135M_GGUF", ABSENT)
    (missing,) = stack.missing_models(Settings())
    assert missing.package == "omnivox-no-such-package" and "pip install x==1" in str(missing)
    assert stack.missing_models(Settings(llm="echo")) == []
    # building the model fails the same way: no fallback to another LLM
    from omnivox.voice.llm import llamacpp_llm

    monkeypatch.setattr(llamacpp_llm, "SMOLLM2_135M_GGUF", ABSENT)
    with pytest.raises(MissingModelPackage, match="pip install x==1"):
        stack.build_llm(Settings())


def test_the_cli_refuses_to_start_with_the_pip_command(monkeypatch):
    from omnivox import cli
    from omnivox.engines import registry

    monkeypatch.setattr(stack, "SMOLLM2_135M_GGUF", ABSENT)
    assert registry.missing_packages(Settings(engine="echo")) == []
    with pytest.raises(SystemExit) as stopped:
        cli.check_models(Settings())
    assert "cannot start the cascade engine" in str(stopped.value) and "pip install x==1" in str(
        stopped.value
    )


class _KeepsState(EchoLlm):
    """The echo LLM, recording what it is asked to compute ahead (a local model keeps it)."""

    def __init__(self) -> None:
        super().__init__()
        self.prefilled: list[tuple[list[str], LlmParams | None]] = []

    def prefill_turn(self, messages, params=None) -> None:
        self.prefilled.append(([m.text() for m in messages], params))


def test_a_prefill_reaches_the_llm_with_the_request_and_stateless_llms_ignore_it():
    llm = _KeepsState()
    stack = VoiceStack(vad=None, asr=None, tts=None, llm=llm)  # type: ignore[arg-type]
    params = LlmParams(max_tokens=20, cache_slot=3)
    request = ReplyRequest([ChatMessage(role="user", content="call my")], params)
    stack.prefill(request)
    assert llm.prefilled == [(["call my"], params)]  # its cache slot too
    plain = VoiceStack(vad=None, asr=None, tts=None, llm=EchoLlm())  # type: ignore[arg-type]
    plain.prefill(request)  # nothing to keep: nothing happens, and the reply is the same
    assert plain.llm.complete(request.messages) == "You said: call my"
