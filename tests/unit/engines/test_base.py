"""The Engine contract: roles, what an engine serves by the roles it has, and the defaults."""

from __future__ import annotations

import threading

from omnivox.engines.base import ChatModel, Engine, GenerateParams, GenResult, PrefillStats, capabilities_of
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.models import VoiceProfile


class Bare(Engine, ChatModel):
    """The least a turn-based engine implements."""

    name = "bare"

    @property
    def chat(self) -> ChatModel:
        return self

    def reset(self) -> None:
        pass

    def prefill(self, messages: list[ChatMessage]) -> PrefillStats:
        return PrefillStats(0, 0, 0, 0)

    def generate(self, params: GenerateParams, stop: threading.Event, result: GenResult):  # type: ignore[no-untyped-def]
        yield from ()


def profile(voices: tuple[str, ...] = ("aoede", "puck")) -> VoiceProfile:
    return VoiceProfile(
        system_prompt="be brief",
        voices=voices,
        default_voice=voices[0],
        context_tokens=100,
        max_reply_tokens=10,
    )


def test_resolve_voice_keeps_a_voice_the_tts_has_else_the_default() -> None:
    p = profile()
    assert p.resolve_voice("puck") == "puck"
    assert p.resolve_voice("alloy") == "aoede"  # an OpenAI voice name this TTS lacks
    assert p.resolve_voice(None) == "aoede"
    assert p.resolve_voice("") == "aoede"


def test_voice_profile_temperatures_default_to_a_livelier_first_reply() -> None:
    t = profile().temperature
    assert t.for_history([ChatMessage(role="user", content="hi")]) == t.first
    assert t.for_history([ChatMessage(role="assistant", content="hello")]) == t.later


def test_an_engine_without_voice_models_has_no_voice_role() -> None:
    # (a realtime session on it is refused as unavailable: worker/realtime/test_session.py)
    assert Bare().voice is None


def test_an_engine_serves_what_its_roles_serve() -> None:
    nothing = capabilities_of(Engine())
    assert not (nothing.streaming or nothing.realtime or nothing.duplex or nothing.audio_in or nothing.vision)
    chat_only = capabilities_of(Bare())
    assert chat_only.streaming and not (chat_only.realtime or chat_only.duplex or chat_only.audio_out)

    class Seeing(Bare):
        sees = True

    assert capabilities_of(Seeing()).vision  # what its own models take in, besides the roles


def test_defaults_hold_no_cache_and_the_optional_hooks_do_nothing() -> None:
    engine = Bare()
    assert engine.kv_length == 0 and engine.held_messages() == []
    assert engine.chat is engine and engine.voice is None and engine.duplex is None
    assert engine.capabilities.streaming and not engine.capabilities.realtime  # the declared default
    assert engine.voices == ()
    engine.load()
    engine.end_session()
    engine.close()
    assert engine.kv_length == 0


def test_gen_results_do_not_share_their_extra_figures() -> None:
    a, b = GenResult(), GenResult()
    a.extra["x"] = 1.0
    assert b.extra == {} and not b.stopped and b.text == "" and b.generated_tokens == 0
