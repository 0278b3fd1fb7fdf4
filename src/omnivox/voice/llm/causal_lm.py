"""A local transformers causal LM: loading one from a directory, building the tiny random one, and
what a forward pass of the installed ``transformers`` takes.

Shared by the engines that run such a model in a worker (``engines.hf``, ``engines.tiny``) and by the
pipeline's AR stage (``pipeline.models.tiny``), so both load the same weights with the same codec.
``transformers`` is imported lazily: importing this module costs nothing.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import torch

from omnivox.voice.llm.byte_codec import VOCAB_SIZE, tiny_qwen2_config
from omnivox.voice.llm.chat_codec import HFChatCodec


def load_causal_lm(
    path: str | Path, device: str = "cpu", dtype: torch.dtype | str | None = None
) -> tuple[Any, HFChatCodec]:
    """A local Hugging Face model directory (never the hub): the model, on ``device``, and its chat
    codec. A tokenizer without a chat template is refused (conversations are rendered with it)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{path}: the tokenizer has no chat_template; this engine renders conversations")
    model = AutoModelForCausalLM.from_pretrained(
        str(path), local_files_only=True, dtype=dtype or default_dtype(device)
    )
    # transformers wraps PreTrainedModel.to in a decorator whose hints mypy reads as a plain function
    model.to(device)  # type: ignore[arg-type]  # (the wrapped .to, above)
    return model, HFChatCodec.for_model(tokenizer, model)


def tiny_causal_lm(
    seed: int = 0,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
) -> Any:
    """A small random Qwen2 over byte ids (``byte_codec``); ``seed`` fixes the weights."""
    from transformers import Qwen2ForCausalLM

    config = tiny_qwen2_config(VOCAB_SIZE, hidden_size, num_layers, num_heads)
    # A private RNG state: building a tiny model must not shift anyone else's random stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    return model.to(device=device, dtype=dtype)  # type: ignore[call-arg]  # the wrapped .to (load_causal_lm)


def new_cache(model: Any) -> Any:
    """An empty ``DynamicCache`` for ``model``."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # transformers before the config argument
        return DynamicCache()


def forward_params(model: Any) -> set[str]:
    """The keyword arguments ``model.forward`` takes (transformers renames some between versions)."""
    return set(inspect.signature(model.forward).parameters)


def cache_argument(model: Any) -> str:
    """The name ``model.forward`` takes its cache under: transformers 5 renamed ``past_key_values``
    to ``cache`` (and warns about the old name until it drops it)."""
    return "cache" if "cache" in forward_params(model) else "past_key_values"


def default_dtype(device: str) -> torch.dtype:
    if str(device).startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32
