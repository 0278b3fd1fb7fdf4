"""The MiniCPM-o 4.5 adapter's control flow, against a recording fake of the model object.

No weights and no GPU here: ``FakeMiniCPMo`` (tests/fake_minicpmo.py) has the real model code's
method names and parameters and records every call, so these tests pin down what the adapter asks
of the model and in what order. tests/gpu/test_minicpmo_gpu.py runs the real model.
"""

from __future__ import annotations

import sys
import threading
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fake_minicpmo import FakeMiniCPMo, FakeOldMiniCPMo, listen, speak, wav_exists
from omnivox.audio.pcm import pcm16_to_b64
from omnivox.audio.wav import read_wav, write_wav_file
from omnivox.core.config import Settings
from omnivox.core.errors import (
    EngineFailure,
    IllegalTransition,
    InvalidAudio,
    PrefillRequired,
    UnsupportedContent,
)
from omnivox.engines import minicpmo_remote as remote
from omnivox.engines.base import GenerateParams, GenResult, capabilities_of
from omnivox.engines.deferred import DeferredEngine
from omnivox.engines.duplex import DuplexParams
from omnivox.engines.minicpmo import MiniCPMoEngine, UnitPhase
from omnivox.engines.registry import build_engine
from omnivox.protocol.chat import AudioPart, ChatMessage, TextPart

SECOND = np.linspace(-0.5, 0.5, 16000, dtype=np.float32)
UNIT = ["streaming_prefill", "streaming_generate", "finalize_unit"]
CLEANUP = ["set_session_stop", "_reset_streaming_state", "decoder.reset", "reset_session"]


def make_engine(
    tmp_path: Path, fake: FakeMiniCPMo | None = None, ref_audio: np.ndarray | None = None
) -> tuple[MiniCPMoEngine, FakeMiniCPMo]:
    fake = fake or FakeMiniCPMo()
    model_dir = tmp_path / "MiniCPM-o-4_5"
    model_dir.mkdir(exist_ok=True)
    ref_path = None
    if ref_audio is not None:
        ref_path = str(tmp_path / "voice.wav")
        write_wav_file(ref_path, ref_audio, 16000)
    loads: list[tuple[str, str]] = []

    def load(path: str, device: str) -> FakeMiniCPMo:
        loads.append((path, device))
        return fake

    engine = MiniCPMoEngine(str(model_dir), device="cuda", ref_audio_path=ref_path, load_model=load)
    engine.load()
    assert loads == [(str(model_dir), "cuda")]
    fake.calls.clear()  # loading is checked on its own
    return engine, fake


def run_unit(engine: MiniCPMoEngine, force_listen: bool = False, frames: list[np.ndarray] | None = None):
    engine.duplex_prefill(SECOND, frames or [])
    unit = engine.duplex_generate(force_listen)
    engine.duplex_finalize()
    return unit


def voice(n: int = 16000) -> np.ndarray:
    return (0.3 * np.sin(np.arange(n) / 10)).astype(np.float32)


# ---- loading and registration


def test_load_opens_the_duplex_wrapper_over_the_same_weights_and_inits_tts(tmp_path: Path) -> None:
    fake = FakeMiniCPMo()
    model_dir = tmp_path / "MiniCPM-o-4_5"
    model_dir.mkdir()
    engine = MiniCPMoEngine(str(model_dir), device="cuda:1", load_model=lambda path, device: fake)
    engine.load()
    assert fake.names() == ["as_duplex", "init_tts"]
    as_duplex = fake.kwargs("as_duplex")[0]
    # audio on (a session may turn it off), the worker decides forced listens, bounded cache
    assert as_duplex == {
        "device": "cuda:1",
        "generate_audio": True,
        "ls_mode": "explicit",
        "force_listen_count": 0,
        "sliding_window_mode": "basic",
    }
    assert engine.duplex_model is fake.duplex and engine.model is fake
    assert engine.name == "minicpmo:MiniCPM-o-4_5"
    caps = engine.capabilities
    assert (caps.streaming, caps.duplex, caps.audio_in, caps.audio_out, caps.vision) == (True,) * 5
    assert not caps.realtime
    assert capabilities_of(engine) == caps  # what its roles serve is what it declared
    assert engine.voices == ()  # no reference voice configured
    loads_its_own = FakeMiniCPMo(as_duplex_inits_tts=True)
    MiniCPMoEngine(str(model_dir), load_model=lambda path, device: loads_its_own).load()
    assert loads_its_own.names() == ["as_duplex", "init_tts"]  # the vocoder is loaded once


def test_older_model_code_gets_the_streaming_vocoder_asked_for(tmp_path: Path) -> None:
    fake = FakeOldMiniCPMo()
    engine = MiniCPMoEngine(str(tmp_path), load_model=lambda path, device: fake)
    engine.load()
    assert fake.kwargs("init_tts") == [{"streaming": True}]
    engine.load()  # a vocoder already loaded is kept
    assert len(fake.kwargs("init_tts")) == 1


def test_load_failures_are_engine_failures_naming_the_cause(tmp_path: Path) -> None:
    missing = MiniCPMoEngine(str(tmp_path / "nowhere"), load_model=lambda p, d: FakeMiniCPMo())
    with pytest.raises(EngineFailure, match="not found"):
        missing.load()
    with pytest.raises(EngineFailure, match="init_tts failed"):
        make_engine(tmp_path, FakeMiniCPMo(fail_on={"init_tts"}))
    with pytest.raises(EngineFailure, match="as_duplex"):
        make_engine(tmp_path, NoDuplexModel())
    (tmp_path / "voice.wav").write_bytes(b"not a wav")
    bad_voice = MiniCPMoEngine(str(tmp_path), ref_audio_path=str(tmp_path / "voice.wav"))
    with pytest.raises(EngineFailure, match="not a readable PCM WAV"):
        bad_voice.load()


class NoDuplexModel(FakeMiniCPMo):
    """Model code from before duplex support: no ``as_duplex``."""

    def __getattribute__(self, name: str) -> Any:
        if name == "as_duplex":
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_registry_needs_a_model_path_and_defers_the_load(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--model PATH"):
        build_engine(Settings(engine="minicpmo"))
    engine = build_engine(Settings(engine="minicpmo", model=str(tmp_path), device="cuda"))
    assert isinstance(engine, DeferredEngine) and engine.name == "minicpmo"
    assert engine.capabilities.duplex and engine.capabilities.vision and engine.capabilities.audio_out
    assert engine.duplex is None  # no duplex role before the load
    with pytest.raises(RuntimeError, match="not loaded"):
        _ = engine.inner


# ---- the duplex unit loop


def test_a_session_calls_prepare_then_prefill_generate_finalize_per_unit_then_cleanup(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    ready = engine.duplex_prepare(DuplexParams(system_prompt="Be brief.", tts_ref_audio=voice()))
    assert ready.vision
    fake.duplex.script = [listen(), speak("Hello there.")]
    run_unit(engine)
    run_unit(engine)
    engine.duplex_cleanup()
    assert fake.names() == ["reset_session", "prepare", *UNIT, *UNIT, *CLEANUP]
    prepare = fake.kwargs("prepare")[0]
    assert prepare["prefix_system_prompt"] == "Be brief."
    assert prepare["ref_audio"] is None  # no LLM reference given, none configured
    prefill = fake.kwargs("streaming_prefill")[0]
    assert prefill["audio_waveform"].dtype == np.float32
    np.testing.assert_array_equal(prefill["audio_waveform"], SECOND)
    assert prefill["frame_list"] is None and prefill["max_slice_nums"] == 1
    generate = fake.kwargs("streaming_generate")[0]
    assert generate["prompt_wav_path"] == prepare["prompt_wav_path"]
    assert generate["max_new_speak_tokens_per_chunk"] == 20
    assert (generate["decode_mode"], generate["temperature"], generate["top_k"], generate["top_p"]) == (
        "sampling",
        0.7,
        20,
        0.8,
    )
    assert generate["listen_prob_scale"] == 1.0 and generate["force_listen_override"] is False


def test_the_session_settings_reach_the_model(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    params = DuplexParams(
        max_new_speak_tokens=7,
        temperature=0.0,
        top_k=5,
        top_p=0.5,
        listen_prob_scale=1.5,
        chunk_ms=1000,
        max_kv_tokens=2048,
        generate_audio=False,
    )
    ready = engine.duplex_prepare(params)
    assert ready.notes == ()
    assert fake.kwargs("prepare")[0]["prefix_system_prompt"] == remote.DEFAULT_SYSTEM_PROMPT
    assert fake.duplex.generate_audio is False and fake.duplex.force_listen_count == 0
    window = fake.duplex.decoder._window_config
    assert (window.basic_window_high_tokens, window.basic_window_low_tokens) == (2048, 1792)
    assert fake.kwargs("decoder.set_window_enabled") == [{"enabled": True}]
    run_unit(engine)
    generate = fake.kwargs("streaming_generate")[0]
    assert (generate["max_new_speak_tokens_per_chunk"], generate["decode_mode"]) == (7, "greedy")
    assert (generate["top_k"], generate["top_p"], generate["listen_prob_scale"]) == (5, 0.5, 1.5)
    assert generate["prompt_wav_path"] is None  # no speech, no vocoder reference
    engine.duplex_prepare(DuplexParams())  # the next session has the window as loaded
    assert (window.basic_window_high_tokens, window.basic_window_low_tokens) == (4000, 3500)


def test_listen_and_speak_map_to_units_with_the_turn_ending_when_finished_or_cut_off(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    engine.duplex_prepare(DuplexParams(tts_ref_audio=voice()))
    fake.duplex.script = [listen(), speak("Hi,"), speak(" there.", end_of_turn=True), speak("So,"), listen()]
    heard = run_unit(engine)
    assert heard.is_listen and heard.text == "" and heard.audio is None and not heard.end_of_turn
    first = run_unit(engine)
    assert not first.is_listen and first.text == "Hi," and not first.end_of_turn and first.tokens == 3
    assert first.audio is not None and first.audio.dtype == np.float32 and first.audio.shape == (2400,)
    finished = run_unit(engine)
    assert finished.text == " there." and finished.end_of_turn
    assert not run_unit(engine).end_of_turn  # "So," opens another turn
    cut_off = run_unit(engine)
    assert cut_off.is_listen and cut_off.end_of_turn and cut_off.audio is None


def test_speech_comes_back_as_float32_mono_whatever_the_model_returns(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    engine.duplex_prepare(DuplexParams(tts_ref_audio=voice()))
    tensor = torch.full((1, 480), 0.5, dtype=torch.bfloat16)
    fake.duplex.script = [speak("a", waveform=tensor), speak("b", waveform=np.zeros(0, np.float32))]
    unit = run_unit(engine)
    assert unit.audio is not None and unit.audio.dtype == np.float32 and unit.audio.shape == (480,)
    assert np.allclose(unit.audio, 0.5)
    assert run_unit(engine).audio is None  # an empty waveform is no audio


def test_without_audio_or_without_a_voice_speak_units_carry_text_only(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    ready = engine.duplex_prepare(DuplexParams(generate_audio=True))  # no voice anywhere
    assert any("no reference voice" in n for n in ready.notes)
    assert fake.duplex.generate_audio is False
    assert fake.kwargs("prepare")[0]["prompt_wav_path"] is None
    fake.duplex.script = [speak("text only")]
    unit = run_unit(engine)
    assert unit.text == "text only" and unit.audio is None


def test_force_listen_is_passed_per_unit(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    engine.duplex_prepare(DuplexParams(tts_ref_audio=voice()))
    fake.duplex.script = [speak("never said"), speak("said")]
    forced = run_unit(engine, force_listen=True)
    assert forced.is_listen and fake.kwargs("streaming_generate")[0]["force_listen_override"] is True
    free = run_unit(engine)
    assert (
        free.text == "never said" and fake.kwargs("streaming_generate")[1]["force_listen_override"] is False
    )


def test_older_code_gets_a_forced_listen_through_its_count_and_closes_units_itself(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path, FakeOldMiniCPMo())
    engine.duplex_prepare(DuplexParams(tts_ref_audio=voice()))
    fake.duplex.script = [speak("later"), speak("now")]
    run_unit(engine)  # a free unit (speaks "later")
    forced = run_unit(engine, force_listen=True)
    assert forced.is_listen and forced.end_of_turn  # it cut the open turn off
    assert fake.duplex.seen_force_listen_count == [0, 2]  # raised past this unit only ...
    assert fake.duplex.force_listen_count == 0  # ... and put back
    assert "force_listen_override" not in fake.kwargs("streaming_generate")[0]
    assert "finalize_unit" not in fake.names()  # the older code closed each unit in generate
    assert run_unit(engine).text == "now"


def test_omni_frames_become_pil_images_and_audio_mode_ignores_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[np.ndarray] = []
    pil = types.ModuleType("PIL")
    image = types.ModuleType("PIL.Image")
    image.fromarray = lambda a: made.append(a) or ("image", a.shape)  # type: ignore[attr-defined]
    pil.Image = image  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "PIL", pil)
    monkeypatch.setitem(sys.modules, "PIL.Image", image)
    frame = np.zeros((4, 6, 3), dtype=np.uint8)
    engine, fake = make_engine(tmp_path)
    engine.duplex_prepare(DuplexParams(mode="omni"))
    run_unit(engine, frames=[frame, frame])
    assert fake.kwargs("streaming_prefill")[0]["frame_list"] == [("image", (4, 6, 3))] * 2
    assert len(made) == 2
    engine.duplex_prepare(DuplexParams(mode="audio"))
    run_unit(engine, frames=[frame])
    assert fake.kwargs("streaming_prefill")[1]["frame_list"] is None
    assert len(made) == 2


def test_bad_unit_input_is_rejected_before_the_model_sees_it(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    engine.duplex_prepare(DuplexParams(mode="omni"))
    with pytest.raises(InvalidAudio):
        engine.duplex_prefill(np.zeros((2, 8), np.float32), [])
    with pytest.raises(InvalidAudio):
        engine.duplex_prefill(np.zeros(8, np.int16), [])
    with pytest.raises(InvalidAudio, match="NaN"):
        engine.duplex_prefill(np.array([0.0, np.nan], np.float32), [])
    with pytest.raises(UnsupportedContent, match="RGB uint8"):
        engine.duplex_prefill(SECOND, [np.zeros((4, 4), np.uint8)])
    assert "streaming_prefill" not in fake.names() and engine.phase is UnitPhase.READY
    run_unit(engine)  # the session goes on


def test_calls_out_of_order_are_illegal_transitions(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    with pytest.raises(IllegalTransition):
        engine.duplex_prefill(SECOND, [])  # before prepare
    engine.duplex_prepare(DuplexParams())
    with pytest.raises(IllegalTransition):
        engine.duplex_generate(False)  # nothing heard yet
    engine.duplex_prefill(SECOND, [])
    with pytest.raises(IllegalTransition):
        engine.duplex_prefill(SECOND, [])  # the unit is not decided
    with pytest.raises(IllegalTransition):
        engine.duplex_finalize()  # nor is there anything to close
    engine.duplex_generate(False)
    with pytest.raises(IllegalTransition):
        engine.duplex_generate(False)
    engine.duplex_finalize()
    engine.duplex_finalize()  # closed already: nothing to do
    assert fake.names().count("finalize_unit") == 1
    with pytest.raises(IllegalTransition, match="duplex session holds the model"):
        engine.prefill([ChatMessage(role="user", content="hi")])


def test_a_failed_model_call_is_an_engine_failure_and_cleanup_recovers(tmp_path: Path) -> None:
    fake = FakeMiniCPMo(fail_on={"streaming_generate"})
    engine, fake = make_engine(tmp_path, fake)
    engine.duplex_prepare(DuplexParams(tts_ref_audio=voice()))
    wav = fake.kwargs("prepare")[0]["prompt_wav_path"]
    engine.duplex_prefill(SECOND, [])
    with pytest.raises(EngineFailure, match="duplex_generate failed") as failure:
        engine.duplex_generate(False)
    assert failure.value.code == "engine_error" and failure.value.fatal
    assert engine.phase is UnitPhase.FAILED
    with pytest.raises(EngineFailure, match="failed earlier"):
        engine.duplex_prefill(SECOND, [])
    fake.calls.clear()
    engine.duplex_cleanup()
    assert fake.names() == CLEANUP and not wav_exists(wav) and engine.phase is UnitPhase.IDLE
    fake.fail_on.clear()
    engine.duplex_prepare(DuplexParams())
    fake.duplex.script = [speak("back")]
    assert run_unit(engine).text == "back"


def test_a_failed_prepare_cleans_up_and_leaves_no_session(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path, FakeMiniCPMo(fail_on={"prepare"}))
    with pytest.raises(EngineFailure, match="prepare failed"):
        engine.duplex_prepare(DuplexParams(tts_ref_audio=voice()))
    assert engine.phase is UnitPhase.IDLE and engine._prompt_wav is None
    assert fake.names()[-3:] == CLEANUP[1:]


def test_cleanup_releases_every_cache_and_the_device_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emptied: list[bool] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    engine, fake = make_engine(tmp_path)
    engine.duplex_prepare(DuplexParams(tts_ref_audio=voice()))
    wav = fake.kwargs("prepare")[0]["prompt_wav_path"]
    assert wav_exists(wav)
    run_unit(engine)
    assert engine.kv_length == fake.duplex.decoder.length > 0
    emptied.clear()
    engine.duplex_cleanup()
    tokenizer = fake.tts.audio_tokenizer
    assert (tokenizer.stream_cache, tokenizer.hift_cache_dict, tokenizer.cache) == (None, None, None)
    assert fake.kwargs("reset_session")[-1] == {"reset_token2wav_cache": True}
    assert emptied == [True] and not wav_exists(wav)
    assert engine.kv_length == 0 and engine.phase is UnitPhase.IDLE
    fake.calls.clear()
    engine.duplex_cleanup()  # twice: still safe, no session to stop
    assert "set_session_stop" not in fake.names() and emptied == [True, True]


def test_cleanup_runs_every_step_even_when_one_fails(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    engine.duplex_prepare(DuplexParams())
    fake.fail_on.add("reset_session")
    with pytest.raises(EngineFailure, match="cleanup"):
        engine.duplex_cleanup()
    assert fake.names()[-3:] == ["set_session_stop", "_reset_streaming_state", "decoder.reset"]
    assert fake.tts.audio_tokenizer.stream_cache is None and engine.phase is UnitPhase.IDLE


def test_a_second_prepare_replaces_the_session(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    engine.duplex_prepare(DuplexParams(tts_ref_audio=voice()))
    first_wav = fake.kwargs("prepare")[0]["prompt_wav_path"]
    engine.duplex_prefill(SECOND, [])
    engine.duplex_prepare(DuplexParams(system_prompt="again"))
    assert not wav_exists(first_wav)
    assert fake.names()[-6:] == [*CLEANUP, "reset_session", "prepare"]
    run_unit(engine)


def test_voices_the_client_sends_or_the_configured_default(tmp_path: Path) -> None:
    default = voice(8000)
    engine, fake = make_engine(tmp_path, ref_audio=default)
    assert engine.voices == ("default",)
    engine.duplex_prepare(DuplexParams())
    prepare = fake.kwargs("prepare")[0]
    np.testing.assert_allclose(prepare["ref_audio"], default, atol=1e-4)
    written, rate = read_wav(fake.duplex.prompt_wav_bytes)
    assert rate == 16000 and np.allclose(written, default, atol=1e-4)
    client_llm, client_tts = voice(4000), voice(3000)
    engine.duplex_prepare(DuplexParams(ref_audio=client_llm, tts_ref_audio=client_tts))
    prepare = fake.kwargs("prepare")[1]
    assert prepare["ref_audio"] is client_llm
    assert len(read_wav(fake.duplex.prompt_wav_bytes)[0]) == 3000
    engine.duplex_prepare(DuplexParams(ref_audio=client_llm))  # the model's voice speaks too
    assert len(read_wav(fake.duplex.prompt_wav_bytes)[0]) == 4000


def test_unusual_settings_are_noted_in_prepared(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    fake.duplex.decoder._window_config = None
    ready = engine.duplex_prepare(DuplexParams(chunk_ms=500, max_kv_tokens=1000, generate_audio=False))
    assert any("1000 ms units" in n for n in ready.notes)
    assert any("max_kv_tokens" in n for n in ready.notes)
    assert fake.duplex.CHUNK_MS == fake.CHUNK_MS == 500


# ---- turn-based streaming


def user(content: Any) -> ChatMessage:
    return ChatMessage(role="user", content=content)


def generate(engine: MiniCPMoEngine, params: GenerateParams, stop: threading.Event | None = None):
    result = GenResult()
    chunks = list(engine.generate(params, stop or threading.Event(), result))
    return chunks, result


def test_prefill_feeds_each_message_once_and_counts_the_cache(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    audio = voice(8000)
    system = ChatMessage(role="system", content="Be brief.")
    question = user([TextPart(text="What is this?"), AudioPart(data=pcm16_to_b64(audio))])
    stats = engine.prefill([system, question])
    calls = fake.kwargs("model.streaming_prefill")
    assert [c["msgs"][0]["role"] for c in calls] == ["system", "user"]
    assert calls[0]["msgs"][0]["content"] == ["Be brief."]
    text, sound = calls[1]["msgs"][0]["content"]
    assert text == "What is this?" and sound.dtype == np.float32 and len(sound) == 8000
    assert [c["is_last_chunk"] for c in calls] == [False, True]
    assert {c["session_id"] for c in calls} == {"omnivox"} and not any(c["omni_mode"] for c in calls)
    assert (stats.prompt_length, stats.message_count, stats.cached_tokens, stats.input_tokens) == (
        15,
        2,
        0,
        15,
    )
    again = engine.prefill([user("And now?")])
    assert (again.cached_tokens, again.input_tokens, again.message_count) == (15, 5, 3)
    assert engine.held_messages() == [system, question, user("And now?")]


def test_generate_streams_text_without_end_markers_and_holds_the_reply(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    engine.prefill([user("hi")])
    fake.replies = [[("Hel", False), ("lo.", False), ("<|tts_eos|><|im_end|>", True)]]
    chunks, result = generate(engine, GenerateParams(max_new_tokens=32, temperature=0.0))
    assert [c.text_delta for c in chunks] == ["Hel", "lo."] and all(c.audio is None for c in chunks)
    call = fake.kwargs("model.streaming_generate")[0]
    assert (call["generate_audio"], call["max_new_tokens"], call["do_sample"]) == (False, 32, False)
    assert result.text == "Hello." and result.generated_tokens == 6 and not result.stopped
    assert engine.held_messages()[-1] == ChatMessage(role="assistant", content="Hello.")


def test_speech_needs_a_voice_and_inits_the_vocoder_cache_once(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    engine.prefill([user("hi")])
    with pytest.raises(UnsupportedContent, match="reference voice"):
        generate(engine, GenerateParams(generate_audio=True))
    engine, fake = make_engine(tmp_path, ref_audio=voice())
    engine.prefill([user("hi")])
    wave = torch.zeros((1, 2400))
    fake.replies = [[(wave, "Hi"), (None, None), (wave, "!")], [(wave, "Again")]]
    chunks, _ = generate(engine, GenerateParams(generate_audio=True))
    assert [(c.text_delta, c.audio.shape) for c in chunks] == [("Hi", (2400,)), ("!", (2400,))]  # type: ignore[union-attr]
    engine.prefill([user("more")])
    generate(engine, GenerateParams(generate_audio=True))
    assert fake.names().count("init_token2wav_cache") == 1


def test_stop_ends_the_reply_between_chunks(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    engine.prefill([user("count")])
    fake.replies = [[("one", False), (" two", False), (" three", True)]]
    stop = threading.Event()
    result = GenResult()
    said = []
    for chunk in engine.generate(GenerateParams(), stop, result):
        said.append(chunk.text_delta)
        stop.set()
    assert said == ["one"] and result.stopped and result.text == "one"
    assert "model.streaming_generate.done" not in fake.names()  # the model's generator was closed
    assert engine.held_messages()[-1].content == "one"


def test_turn_based_failures_drop_the_conversation(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    with pytest.raises(PrefillRequired):
        generate(engine, GenerateParams())
    engine.prefill([user("hi")])
    fake.replies = [[("par", False), "fail"]]
    with pytest.raises(EngineFailure, match="generation failed"):
        generate(engine, GenerateParams())
    assert engine.held_messages() == [] and fake.kwargs("reset_session")[-1] == {
        "reset_token2wav_cache": False
    }
    fake.fail_on.add("streaming_prefill")
    with pytest.raises(EngineFailure, match="prefill failed"):
        engine.prefill([user("a"), user("b")])
    assert engine.held_messages() == [] and engine.kv_length == 0
    with pytest.raises(InvalidAudio):
        engine.prefill([user([AudioPart(data="%%%")])])


def test_reset_and_duplex_sessions_start_the_conversation_over(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    engine.prefill([user("hi")])
    engine.reset()
    assert (
        fake.kwargs("reset_session")[-1] == {"reset_token2wav_cache": False} and engine.held_messages() == []
    )
    engine.prefill([user("hi")])
    engine.duplex_prepare(DuplexParams())
    assert engine.held_messages() == [] and fake.kv == 0
    engine.duplex_cleanup()
    assert engine.prefill([user("hello")]).cached_tokens == 0


def test_a_consumer_that_walks_away_leaves_the_cut_short_reply_held(tmp_path: Path) -> None:
    engine, fake = make_engine(tmp_path)
    engine.prefill([user("count")])
    fake.replies = [[("one", False), (" two", False)]]
    result = GenResult()
    chunks = engine.generate(GenerateParams(), threading.Event(), result)
    assert next(chunks).text_delta == "one"
    chunks.close()  # type: ignore[attr-defined]
    assert result.stopped and result.text == "one"
    assert engine.held_messages()[-1] == ChatMessage(role="assistant", content="one")
