"""The tiny engine: exact incremental prefill, stop, reset, and what it refuses."""

from __future__ import annotations

import threading

import pytest
import torch

from omnivox.core.errors import ContextTooLong, Interrupted, PrefillRequired, UnsupportedContent
from omnivox.engines.base import GenerateParams, GenResult
from omnivox.engines.tiny import TinyEngine
from omnivox.protocol.chat import ChatMessage, ImagePart, TextPart
from omnivox.voice.llm.byte_codec import END, ByteChatCodec
from omnivox.voice.llm.chat_codec import IncrementalDetokenizer

GREEDY = GenerateParams(max_new_tokens=24, temperature=0.0)


def msg(role: str, content: str) -> ChatMessage:
    return ChatMessage(role=role, content=content)  # type: ignore[arg-type]


def run(engine: TinyEngine, params: GenerateParams = GREEDY, stop: threading.Event | None = None):
    result = GenResult()
    chunks = list(engine.generate(params, stop or threading.Event(), result))
    return chunks, result


def cache_tensors(engine: TinyEngine) -> list[torch.Tensor]:
    cache = engine._cache
    return [t for layer in cache.layers for t in (layer.keys, layer.values)]


def assert_same_cache(a: TinyEngine, b: TinyEngine) -> None:
    assert a.token_ids == b.token_ids
    for x, y in zip(cache_tensors(a), cache_tensors(b), strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-12)


def test_incremental_prefill_matches_a_full_prefill_over_three_turns() -> None:
    engine = TinyEngine(seed=0)
    sent = [msg("system", "You are a tiny test model."), msg("user", "Hello, who are you?")]
    user_turns = ["Tell me more.", "And then? Ünïcode is fine in prompts."]
    for turn in range(3):
        before = engine.kv_length
        stats = engine.prefill(sent)
        fresh = TinyEngine(seed=0)
        fresh_stats = fresh.prefill(engine.held_messages())
        if turn == 0:
            assert stats.cached_tokens == 0
        else:
            # A hit computes only the new message: role marker, its bytes, end marker.
            assert stats.cached_tokens == before > 0
            assert stats.input_tokens == len(sent[0].text().encode()) + 2
        assert stats.prompt_length == fresh_stats.prompt_length == engine.kv_length
        assert fresh_stats.cached_tokens == 0
        assert_same_cache(engine, fresh)

        chunks, result = run(engine)
        fresh_chunks, fresh_result = run(fresh)
        assert [c.text_delta for c in chunks] == [c.text_delta for c in fresh_chunks]
        assert result == fresh_result
        assert result.generated_tokens > 0
        assert "".join(c.text_delta for c in chunks) == result.text
        assert engine.held_messages()[-1] == msg("assistant", result.text)
        # After the reply, the cache holds exactly what a full prefill of the conversation computes.
        assert engine.token_ids == tuple(engine.expected_ids())
        full = TinyEngine(seed=0)
        full.prefill(engine.held_messages())
        assert_same_cache(engine, full)
        if turn < 2:
            sent = [msg("user", user_turns[turn])]


def test_replies_are_printable_ascii_and_round_trip_into_the_next_prefill() -> None:
    engine = TinyEngine(seed=3)
    engine.prefill([msg("user", "hi")])
    _, greedy = run(engine, GenerateParams(max_new_tokens=64))
    _, sampled = run(engine, GenerateParams(max_new_tokens=64, temperature=1.0))
    for text in (greedy.text, sampled.text):
        assert all(0x20 <= ord(ch) < 0x7F for ch in text)
    # What a client echoes back (via JSON) is what the engine holds: the same hash, the same ids.
    echoed = [ChatMessage.model_validate_json(m.model_dump_json()) for m in engine.held_messages()]
    other = TinyEngine(seed=3)
    other.prefill(echoed)
    assert other.token_ids == engine.token_ids


def test_max_new_tokens_bounds_the_reply() -> None:
    engine = TinyEngine(seed=0)
    engine.prefill([msg("user", "count")])
    chunks, result = run(engine, GenerateParams(max_new_tokens=5))
    assert result.generated_tokens <= 5
    assert sum(c.tokens for c in chunks) == result.generated_tokens
    assert not result.stopped


def test_stop_mid_generation_stops_within_one_token_and_holds_the_partial_reply() -> None:
    engine = TinyEngine(seed=0)
    engine.prefill([msg("user", "talk for a long time")])
    stop = threading.Event()
    result = GenResult()
    received: list[str] = []
    for chunk in engine.generate(GenerateParams(max_new_tokens=200), stop, result):
        received.append(chunk.text_delta)
        if len(received) == 3:
            stop.set()
    assert result.stopped
    assert result.generated_tokens == 3  # ASCII: one token per chunk, and no token after the stop
    assert result.text == "".join(received)
    assert engine.held_messages()[-1] == msg("assistant", result.text)
    full = TinyEngine(seed=0)
    full.prefill(engine.held_messages())
    assert_same_cache(engine, full)
    # The conversation goes on from the cut-short reply, still on a cache hit.
    stats = engine.prefill([msg("user", "go on")])
    assert stats.cached_tokens == full.kv_length


def test_stop_set_before_generate_produces_nothing() -> None:
    engine = TinyEngine(seed=0)
    engine.prefill([msg("user", "hi")])
    stop = threading.Event()
    stop.set()
    chunks, result = run(engine, stop=stop)
    assert chunks == [] and result.stopped and result.text == ""
    assert engine.held_messages()[-1] == msg("assistant", "")
    assert engine.token_ids == tuple(engine.expected_ids())


def test_a_consumer_that_walks_away_leaves_a_consistent_engine() -> None:
    engine = TinyEngine(seed=0)
    engine.prefill([msg("user", "hi")])
    result = GenResult()
    gen = engine.generate(GenerateParams(max_new_tokens=100), threading.Event(), result)
    first = next(gen)
    gen.close()
    assert result.stopped and result.text == first.text_delta
    assert engine.held_messages()[-1].content == first.text_delta
    assert engine.token_ids == tuple(engine.expected_ids())


def test_reset_clears_messages_and_cache() -> None:
    engine = TinyEngine(seed=0)
    engine.prefill([msg("user", "hi")])
    run(engine)
    engine.reset()
    assert engine.kv_length == 0 and engine.held_messages() == [] and engine.token_ids == ()
    stats = engine.prefill([msg("user", "hi")])
    assert stats.cached_tokens == 0 and stats.input_tokens == stats.prompt_length == 4


def test_generate_without_a_conversation_is_refused() -> None:
    # The byte codec renders an assistant marker even for an empty conversation, so it can answer;
    # an engine whose render is empty cannot, and says so.
    engine = TinyEngine(seed=0)
    engine.codec = type("Empty", (ByteChatCodec,), {"encode_chat": lambda self, c, g: []})()
    with pytest.raises(PrefillRequired):
        run(engine)


def test_unsupported_content_raises_and_changes_nothing() -> None:
    engine = TinyEngine(seed=0)
    engine.prefill([msg("user", "hi")])
    held, ids = engine.held_messages(), engine.token_ids
    image = ChatMessage(role="user", content=[TextPart(text="look"), ImagePart(data="aGk=")])
    with pytest.raises(UnsupportedContent) as info:
        engine.prefill([msg("user", "fine"), image])
    assert info.value.code == "unsupported_content"
    assert engine.held_messages() == held and engine.token_ids == ids


def test_text_parts_render_like_the_joined_string_the_routing_hash_uses() -> None:
    a, b = TinyEngine(seed=0), TinyEngine(seed=0)
    a.prefill([ChatMessage(role="user", content=[TextPart(text="ab"), TextPart(text="cd")])])
    b.prefill([msg("user", "abcd")])
    assert a.token_ids == b.token_ids


def test_same_seed_same_engine_other_seed_other_weights() -> None:
    a, b, c = TinyEngine(seed=7), TinyEngine(seed=7), TinyEngine(seed=8)
    for e in (a, b, c):
        e.prefill([msg("user", "hi")])
    assert run(a)[1] == run(b)[1]
    assert not torch.equal(a.model.lm_head.weight, c.model.lm_head.weight)


def test_the_end_of_turn_closes_the_held_reply() -> None:
    engine = TinyEngine(seed=0)
    engine.prefill([msg("user", "hi")])
    run(engine)
    assert engine.token_ids[-1] == END


def test_detokenizer_never_splits_a_character() -> None:
    text = "héllo wörld € 𝄞!"
    detok = IncrementalDetokenizer(ByteChatCodec().decode)
    deltas = [detok.push(b) for b in text.encode()]
    assert "".join(deltas) == text == detok.text
    assert all("\ufffd" not in d for d in deltas)
    assert deltas[1] == "" and deltas[2] == "é"  # two bytes: nothing, then the whole character


def test_a_conversation_past_the_context_is_refused_before_any_compute() -> None:
    engine = TinyEngine(seed=0)
    engine.max_context_tokens = 100
    with pytest.raises(ContextTooLong) as err:
        engine.prefill([ChatMessage(role="user", content="x" * 500)])
    assert err.value.details["limit"] == 100 and engine.kv_length == 0 and engine.held_messages() == []
    stats = engine.prefill([ChatMessage(role="user", content="short")])
    assert stats.input_tokens == engine.kv_length > 0


def test_an_interrupted_prefill_stops_between_chunks_and_keeps_a_consistent_cache() -> None:
    from omnivox.engines import hf

    engine = TinyEngine(seed=0)
    fed: list[int] = []
    real_feed = engine._feed

    def feed(ids):
        fed.append(len(ids))
        if len(fed) == 1:
            engine.interrupt.set()  # the session ends while the first chunk runs
        return real_feed(ids)

    engine._feed = feed  # type: ignore[method-assign]
    with pytest.raises(Interrupted):
        engine.prefill([ChatMessage(role="user", content="y" * (hf.PREFILL_CHUNK * 3))])
    assert fed == [hf.PREFILL_CHUNK]  # one chunk ran, the rest never did
    assert engine.held_messages() == [] and engine.token_ids == tuple(engine.token_ids)
    engine.interrupt.clear()
    engine._feed = real_feed  # type: ignore[method-assign]
    engine.prefill([ChatMessage(role="user", content="again")])
    assert list(engine.token_ids) == engine.expected_ids()
