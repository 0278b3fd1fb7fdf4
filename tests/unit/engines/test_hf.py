"""TransformersEngine over a model directory written by the test: loading, streaming, exact caching."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from omnivox.engines.base import GenerateParams, GenResult
from omnivox.engines.hf import TransformersEngine
from omnivox.engines.tiny import TinyEngine
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.byte_codec import ByteChatCodec
from omnivox.voice.llm.chat_codec import HFChatCodec

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = ["hello world, how are you today?", "the quick brown fox jumps over the lazy dog"] * 10


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Llama and a byte-level BPE tokenizer with a ChatML template, saved like a hub model."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(CORPUS, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>", chat_template=CHATML
    )
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
    )
    path = tmp_path_factory.mktemp("tiny-llama")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def run(engine: TransformersEngine, params: GenerateParams, stop: threading.Event | None = None):
    result = GenResult()
    chunks = list(engine.generate(params, stop or threading.Event(), result))
    return chunks, result


def test_loads_a_saved_directory_and_streams_text(model_dir: Path) -> None:
    engine = TransformersEngine.from_pretrained(model_dir, device="cpu")
    assert isinstance(engine.codec, HFChatCodec)
    im_end = engine.codec.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in engine.codec.stop_ids  # the template's end of turn, though eos is <|endoftext|>
    stats = engine.prefill([user("hello world")])
    assert stats.cached_tokens == 0 and stats.input_tokens == stats.prompt_length > 0
    chunks, result = run(engine, GenerateParams(max_new_tokens=12))
    assert chunks and 0 < result.generated_tokens <= 12
    assert "".join(c.text_delta for c in chunks) == result.text
    assert sum(c.tokens for c in chunks) <= result.generated_tokens
    assert engine.held_messages()[-1] == ChatMessage(role="assistant", content=result.text)
    assert engine.token_ids == tuple(engine.expected_ids())


def test_three_turns_on_a_hit_equal_fresh_full_prefills(model_dir: Path) -> None:
    params = GenerateParams(max_new_tokens=10)
    engine = TransformersEngine.from_pretrained(model_dir, dtype=torch.float64)
    sent = [ChatMessage(role="system", content="be brief"), user("how are you?")]
    for turn in range(3):
        before = engine.kv_length
        stats = engine.prefill(sent)
        if turn:
            assert stats.cached_tokens > 0 and stats.cached_tokens <= before
            assert stats.input_tokens < stats.prompt_length
        fresh = TransformersEngine.from_pretrained(model_dir, dtype=torch.float64)
        fresh.prefill(engine.held_messages())
        assert fresh.token_ids == engine.token_ids
        assert run(engine, params)[1] == run(fresh, params)[1]
        # BPE may tokenize the reply text differently from how it was generated; the engine
        # re-syncs to the render, so it still holds what a full prefill holds.
        assert engine.token_ids == fresh.token_ids == tuple(engine.expected_ids())
        sent = [user(f"the lazy dog, turn {turn}")]


def test_stop_and_reset(model_dir: Path) -> None:
    engine = TransformersEngine.from_pretrained(model_dir)
    engine.prefill([user("hello")])
    stop = threading.Event()
    stop.set()
    chunks, result = run(engine, GenerateParams(max_new_tokens=50), stop)
    assert chunks == [] and result.stopped and result.generated_tokens == 0
    assert engine.token_ids == tuple(engine.expected_ids())
    engine.reset()
    assert engine.kv_length == 0 and engine.held_messages() == []


class _TurnCountingCodec(ByteChatCodec):
    """A template that rewrites its first line every turn, as some real templates do (dates, counts)."""

    def encode_chat(self, conversation, add_generation_prompt):  # type: ignore[no-untyped-def]
        header = [{"role": "system", "content": f"turns so far: {len(conversation)}"}]
        return super().encode_chat(header + conversation, add_generation_prompt)


def test_a_render_that_changes_earlier_ids_crops_to_the_common_prefix() -> None:
    engine = TinyEngine(seed=0)
    engine.codec = _TurnCountingCodec()
    engine.prefill([user("hi")])
    run(engine, GenerateParams(max_new_tokens=8))
    before = engine.kv_length
    stats = engine.prefill([user("again")])
    # Only "<system>turns so far: " survives: the count changed right after it.
    assert 0 < stats.cached_tokens < before
    assert engine.token_ids == tuple(engine.expected_ids())
    full = TinyEngine(seed=0)
    full.codec = _TurnCountingCodec()
    full.prefill(engine.held_messages())
    assert full.token_ids == engine.token_ids
    params = GenerateParams(max_new_tokens=8)
    assert run(engine, params)[1] == run(full, params)[1]


def test_the_registry_builds_both_engines(model_dir: Path) -> None:
    from omnivox.core.config import Settings
    from omnivox.engines.registry import build_engine

    # Heavy engines are built in load() (in the worker's thread), so the worker reports LOADING.
    tiny = build_engine(Settings(engine="tiny", tiny_seed=3))
    assert tiny.chat is None and tiny.duplex is None  # no roles until it has loaded
    tiny.load()
    assert isinstance(tiny.inner, TinyEngine) and tiny.name == "tiny"
    assert tiny.chat is tiny.inner and tiny.duplex is not None
    hf = build_engine(Settings(engine="transformers", model=str(model_dir), device="cpu"))
    hf.load()
    assert isinstance(hf.inner, TransformersEngine) and hf.capabilities.streaming
    assert hf.name.startswith("transformers:")
