"""The tiny engine's duplex mode: the per-unit KV path, the listen/speak decision, trimming, state."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest
import torch

from omnivox.core.errors import InvalidAudio, InvalidMessage, PrefillRequired
from omnivox.engines.base import OUTPUT_SAMPLE_RATE, GenerateParams, GenResult
from omnivox.engines.duplex import DuplexParams, DuplexUnit
from omnivox.engines.tiny import TinyEngine
from omnivox.engines.tiny_duplex import (
    CHUNK_END,
    LISTEN,
    SPEAK,
    TONE_SAMPLES,
    TURN_END,
    UNIT,
    TinyDuplexModel,
)
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.byte_codec import END, SYSTEM

PROMPT = "You are a tiny duplex model."
ALWAYS_SPEAK = 1e-9  # listen_prob_scale


def chunk(seed: int, ms: int = 1000) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(16 * ms) * 0.1).astype(np.float32)


def frame(seed: int, h: int = 48, w: int = 64) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def session(engine_seed: int = 0, **params: object) -> TinyEngine:
    engine = TinyEngine(seed=engine_seed)
    engine.duplex.prepare(DuplexParams(system_prompt=PROMPT, **params))  # type: ignore[arg-type]
    return engine


def unit(
    engine: TinyEngine, i: int, frames: list[np.ndarray] | None = None, force: bool = False
) -> DuplexUnit:
    engine.duplex.prefill(chunk(i), frames or [])
    result = engine.duplex.generate(force_listen=force)
    engine.duplex.finalize()
    return result


def keys(engine: TinyEngine) -> list[torch.Tensor]:
    assert engine._duplex is not None
    return [t for layer in engine._duplex._cache.layers for t in (layer.keys, layer.values)]


def pending(engine: TinyEngine) -> torch.Tensor:
    assert engine._duplex is not None and engine._duplex.pending_logits is not None
    return engine._duplex.pending_logits


def assert_printable(text: str) -> None:
    assert all(0x20 <= ord(c) < 0x7F for c in text), text


def test_incremental_units_match_one_full_prefill_of_the_same_embeddings() -> None:
    engine = session(listen_prob_scale=ALWAYS_SPEAK, max_new_speak_tokens=6)
    units = [unit(engine, 1, force=True), unit(engine, 2, [frame(0)])]
    engine.duplex.prefill(chunk(3), [frame(1)])
    listened, spoke = units
    assert listened.is_listen and not spoke.is_listen and spoke.text

    model = TinyDuplexModel(seed=0)  # the same weights, built afresh
    with torch.inference_mode():
        said = [*spoke.text.encode(), TURN_END if spoke.end_of_turn else CHUNK_END]
        parts = [
            model.embed_tokens([SYSTEM, *PROMPT.encode(), END]),
            model.embed_tokens([UNIT]),
            model.embed_audio(chunk(1)),
            model.embed_tokens([LISTEN, UNIT]),
            model.embed_frame(frame(0)),
            model.embed_audio(chunk(2)),
            model.embed_tokens([SPEAK, *said, UNIT]),
            model.embed_frame(frame(1)),
            model.embed_audio(chunk(3)),
        ]
        cache = model.new_cache()
        logits = model.forward(torch.cat(parts), 0, cache)
    torch.testing.assert_close(pending(engine), logits, rtol=0, atol=1e-10)
    assert engine.duplex.kv_length == cache.get_seq_length()
    full = [t for layer in cache.layers for t in (layer.keys, layer.values)]
    for a, b in zip(keys(engine), full, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_force_listen_listens_and_feeds_listen() -> None:
    engine = session(listen_prob_scale=ALWAYS_SPEAK)
    engine.duplex.prefill(chunk(0), [])
    before = engine.duplex.kv_length
    result = engine.duplex.generate(force_listen=True)
    assert result == DuplexUnit(is_listen=True)
    engine.duplex.finalize()
    assert engine.duplex.kv_length == before + 1  # <listen> closes the unit; no chunk end after it


@pytest.mark.parametrize(("scale", "listens"), [(1e9, True), (ALWAYS_SPEAK, False)])
def test_listen_prob_scale_tips_the_decision(scale: float, listens: bool) -> None:
    for temperature in (0.7, 0.0):
        engine = session(listen_prob_scale=scale, temperature=temperature)
        assert [unit(engine, i).is_listen for i in range(8)] == [listens] * 8


def test_a_neutral_scale_both_listens_and_speaks() -> None:
    engine = session(listen_prob_scale=1.0, seed=1)
    decisions = {unit(engine, i).is_listen for i in range(30)}
    assert decisions == {True, False}


def test_speech_is_bounded_printable_and_voiced_at_24_khz() -> None:
    engine = session(listen_prob_scale=ALWAYS_SPEAK, max_new_speak_tokens=5, temperature=1.0, top_p=1.0)
    for i in range(10):
        result = unit(engine, i)
        assert not result.is_listen and len(result.text) == result.tokens <= 5
        assert_printable(result.text)
        if result.text:
            assert result.audio is not None and result.audio.dtype == np.float32
            assert result.audio.shape == (len(result.text) * TONE_SAMPLES,)  # 40 ms per byte at 24 kHz
            assert TONE_SAMPLES == OUTPUT_SAMPLE_RATE // 25
            assert 0 < np.abs(result.audio).max() <= 1
        else:
            assert result.audio is None
    quiet = session(listen_prob_scale=ALWAYS_SPEAK, generate_audio=False)
    result = unit(quiet, 0)
    assert result.text and result.audio is None
    silent = session(listen_prob_scale=ALWAYS_SPEAK, max_new_speak_tokens=0)
    assert unit(silent, 0) == DuplexUnit(is_listen=False)


def bump_after(engine: TinyEngine, token: int, after_calls: int) -> None:
    """Make the model pick ``token`` from its ``after_calls``-th forward in generate on."""
    assert engine._duplex is not None
    model = engine._duplex.model
    forward: Callable[..., torch.Tensor] = model.forward
    calls = 0

    def bumped(embeds: torch.Tensor, start: int, cache: object) -> torch.Tensor:
        nonlocal calls
        logits = forward(embeds, start, cache).clone()
        calls += 1
        if calls > after_calls:
            logits[token] += 1e6
        return logits

    model.forward = bumped  # type: ignore[method-assign]


@pytest.mark.parametrize(("token", "spoken", "end_of_turn"), [(TURN_END, 0, True), (CHUNK_END, 3, False)])
def test_speech_stops_at_a_terminator(token: int, spoken: int, end_of_turn: bool) -> None:
    engine = session(listen_prob_scale=ALWAYS_SPEAK, max_new_speak_tokens=20)
    engine.duplex.prefill(chunk(0), [])
    bump_after(engine, token, after_calls=spoken)  # <speak> gives the first byte, each byte the next
    result = engine.duplex.generate(force_listen=False)
    assert not result.is_listen and len(result.text) == spoken and result.end_of_turn is end_of_turn
    before = engine.duplex.kv_length
    engine.duplex.finalize()
    assert engine.duplex.kv_length == before + 1  # the terminator picked, once


def test_finalize_trims_to_max_kv_tokens_keeping_the_system_prompt() -> None:
    limit = 160
    engine = session(listen_prob_scale=0.5, max_kv_tokens=limit, max_new_speak_tokens=8)
    prompt = [t.clone() for t in keys(engine)]
    held = engine.duplex.kv_length
    trimmed = 0
    for i in range(30):
        engine.duplex.prefill(chunk(i), [frame(i)] if i % 2 else [])
        result = engine.duplex.generate(force_listen=False)
        assert_printable(result.text)
        before = [t.clone() for t in keys(engine)]
        unfed = 1 if result.is_listen or result.end_of_turn or len(result.text) < 8 else 2
        engine.duplex.finalize()
        assert engine.duplex.kv_length <= limit
        after = keys(engine)
        for p, a, b in zip(prompt, after, before, strict=True):
            torch.testing.assert_close(a[..., :held, :], p, rtol=0, atol=0)  # the prompt stays
            # What is kept past the prompt is the newest of what was held, then the fed closers.
            kept = a.shape[-2] - held - unfed
            torch.testing.assert_close(a[..., held : held + kept, :], b[..., b.shape[-2] - kept :, :])
        if after[0].shape[-2] < before[0].shape[-2] + unfed:
            trimmed += 1
            assert engine._duplex is not None and engine._duplex._unit_starts[0] == held  # whole units
    assert trimmed > 5
    assert engine._duplex is not None and engine._duplex._position > 2 * limit  # positions went on
    decisions = {unit(engine, 100 + i).is_listen for i in range(10)}  # still deciding after trims
    assert False in decisions


def test_a_limit_that_leaves_no_room_past_the_prompt_is_refused() -> None:
    engine = TinyEngine(seed=0)
    with pytest.raises(InvalidMessage) as err:
        engine.duplex.prepare(DuplexParams(system_prompt="x" * 100, max_kv_tokens=120))
    assert err.value.details["field"] == "max_kv_tokens"


def decisions(engine: TinyEngine, n: int = 20) -> list[tuple[bool, str]]:
    return [(r.is_listen, r.text) for r in (unit(engine, i) for i in range(n))]


def test_the_same_seed_gives_the_same_units() -> None:
    first = decisions(session(seed=7))
    assert first == decisions(session(seed=7))
    engine = session(seed=7)
    engine.duplex.prepare(DuplexParams(system_prompt=PROMPT, seed=7))  # a second session reseeds
    assert decisions(engine) == first
    assert decisions(session(seed=8)) != first
    # Without a session seed the engine's seed decides.
    assert decisions(session(seed=None)) == decisions(session(seed=None))


def test_frames_are_seen_and_only_the_latest_counts() -> None:
    logits = {}
    for name, frames in {
        "audio": [],
        "omni": [frame(1)],
        "other": [frame(2)],
        "two": [frame(2), frame(1)],
        "big": [frame(1, 480, 640)],
    }.items():
        engine = session()
        engine.duplex.prefill(chunk(0), frames)
        logits[name] = pending(engine)
    assert not torch.allclose(logits["audio"], logits["omni"])
    assert not torch.allclose(logits["omni"], logits["other"])
    torch.testing.assert_close(logits["two"], logits["omni"], rtol=0, atol=0)
    assert torch.isfinite(logits["big"]).all()


def test_the_reference_audio_is_part_of_the_kept_prefix() -> None:
    plain = session()
    voiced = session(ref_audio=chunk(9, ms=1050))
    assert voiced.duplex.kv_length == plain.duplex.kv_length + 11  # one embedding per started 100 ms
    assert voiced._duplex is not None and voiced._duplex._prefix == voiced.duplex.kv_length


@pytest.mark.parametrize(
    "audio",
    [
        np.zeros(0, np.float32),
        np.zeros((2, 800), np.float32),
        np.zeros(1600, np.int16),
        np.array([0.0, np.nan], np.float32),
        [0.0, 0.1],
    ],
)
def test_bad_audio_is_refused_and_the_session_goes_on(audio: object) -> None:
    engine = session()
    held = engine.duplex.kv_length
    with pytest.raises(InvalidAudio):
        engine.duplex.prefill(audio, [])  # type: ignore[arg-type]
    assert engine.duplex.kv_length == held
    unit(engine, 0)


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros((32, 32), np.uint8),
        np.zeros((32, 32, 4), np.uint8),
        np.zeros((32, 32, 3), np.float32),
        np.zeros((0, 32, 3), np.uint8),
        "not a frame",
    ],
)
def test_bad_frames_are_refused_and_the_session_goes_on(bad: object) -> None:
    engine = session()
    held = engine.duplex.kv_length
    with pytest.raises(InvalidMessage):
        engine.duplex.prefill(chunk(0), [frame(0), bad])  # type: ignore[list-item]
    assert engine.duplex.kv_length == held
    unit(engine, 0, [frame(0)])


def test_out_of_order_calls() -> None:
    engine = TinyEngine(seed=0)
    with pytest.raises(PrefillRequired):
        engine.duplex.prefill(chunk(0), [])
    with pytest.raises(PrefillRequired):
        engine.duplex.generate(force_listen=False)
    engine.duplex.finalize()  # nothing to close
    engine.duplex.prepare(DuplexParams())
    with pytest.raises(PrefillRequired):
        engine.duplex.generate(force_listen=False)
    # A skipped finalize is done by the next prefill: the cache matches a session that ran it.
    skipped, ran = session(listen_prob_scale=ALWAYS_SPEAK), session(listen_prob_scale=ALWAYS_SPEAK)
    for engine in (skipped, ran):
        engine.duplex.prefill(chunk(0), [])
        engine.duplex.generate(force_listen=False)
    ran.duplex.finalize()
    for engine in (skipped, ran):
        engine.duplex.prefill(chunk(1), [])
    torch.testing.assert_close(pending(skipped), pending(ran), rtol=0, atol=0)


def text_turn(engine: TinyEngine) -> list[str]:
    engine.prefill([ChatMessage(role="user", content="hello there")])
    texts = []
    for temperature in (0.0, 1.0):
        result = GenResult()
        list(
            engine.generate(
                GenerateParams(max_new_tokens=16, temperature=temperature), threading.Event(), result
            )
        )
        texts.append(result.text)
    return texts


def test_cleanup_is_idempotent_and_leaves_text_mode_as_a_fresh_engines() -> None:
    engine = TinyEngine(seed=0)
    engine.duplex.cleanup()  # without a prepare
    engine.duplex.prepare(DuplexParams(system_prompt=PROMPT, temperature=1.0))
    for i in range(5):
        unit(engine, i)
    assert engine.duplex.kv_length > 0
    engine.duplex.cleanup()
    engine.duplex.cleanup()
    assert engine.kv_length == 0 and engine.held_messages() == []
    with pytest.raises(PrefillRequired):
        engine.duplex.prefill(chunk(0), [])
    assert text_turn(engine) == text_turn(TinyEngine(seed=0))


def test_a_duplex_session_leaves_the_held_conversation_alone() -> None:
    engine = TinyEngine(seed=0)
    engine.prefill([ChatMessage(role="user", content="remember me")])
    held, length = engine.held_messages(), engine.kv_length
    engine.duplex.prepare(DuplexParams(system_prompt=PROMPT * 4))
    unit(engine, 0)
    assert engine.duplex.kv_length > 0  # the duplex cache, while the session lasts
    assert engine.held_messages() == held and engine.kv_length == length
    engine.duplex.cleanup()
    assert engine.held_messages() == held and engine.kv_length == length


def test_capabilities_are_declared_before_and_after_load() -> None:
    from omnivox.core.config import Settings
    from omnivox.engines.base import capabilities_of
    from omnivox.engines.registry import build_engine

    deferred = build_engine(Settings(engine="tiny"))
    before = deferred.capabilities
    assert before.duplex and before.vision and before.streaming
    deferred.load()
    assert deferred.capabilities == before == TinyEngine.capabilities
    assert capabilities_of(deferred) == before  # what its roles serve, once loaded
    ready = deferred.duplex.prepare(DuplexParams(mode="omni"))
    assert ready.vision and ready.notes == ()
    assert deferred.duplex.prepare(DuplexParams(voice="puck")).notes
