"""The tiny model as pipeline stages: an AR runner with continuous batching, and two toy encoders.

``TinyRunner`` is the ``ARRunner`` of the ``ar`` scheduler for the tiny random Qwen2 (or any
transformers causal LM with a ``ChatCodec``): each request keeps its own keys and values; a decode
step left-pads every running request's cache to the longest, masks the padding, runs one forward
pass for all of them and appends each one's new column to its own cache. So requests of any
lengths join and leave the batch between steps, and each gets exactly the tokens it would get
alone (greedy; the tests check this on float64 weights).

The fan-in example (spec ``fanin``) feeds it two "encoders" (fixed random projections of audio
frame energies and of a downsampled image): their embeddings are injected as soft tokens before
the prompt, as an omni model's thinker takes multimodal embeddings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from omnivox.core.config import Settings
from omnivox.pipeline.schedulers.ar import ARScheduler
from omnivox.pipeline.schedulers.simple import SimpleScheduler
from omnivox.pipeline.spec import StageSpec
from omnivox.voice.llm.byte_codec import ByteChatCodec
from omnivox.voice.llm.causal_lm import cache_argument, load_causal_lm, new_cache, tiny_causal_lm
from omnivox.voice.llm.chat_codec import ChatCodec

Values = dict[str, Any]
EMBED = 16  # the toy encoders' embedding size


@dataclass
class Decoding:
    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [1, heads, length, dim]
    next_input: int  # the token the next step feeds
    max_tokens: int
    made: list[int] = field(default_factory=list)
    text: str = ""

    @property
    def length(self) -> int:
        return int(self.kv[0][0].shape[2])


class TinyRunner:
    def __init__(self, model: Any, codec: ChatCodec, max_tokens: int = 64, seed: int = 0) -> None:
        self.model = model.eval()
        self.codec = codec
        self.max_tokens = max_tokens
        hidden = model.config.hidden_size
        gen = torch.Generator().manual_seed(seed + 1)
        self.soft = torch.randn(EMBED, hidden, generator=gen, dtype=model.dtype) / EMBED**0.5
        self.live = 0
        self._cache_arg = cache_argument(model)

    def prefill(self, data: Values) -> Decoding:
        messages = data.get("messages")
        embeds = []
        if messages is None:  # fan-in: {source: values}; the text and embeddings come from the encoders
            parts = [v for v in data.values() if isinstance(v, dict)]
            text = next((str(p["text"]) for p in parts if p.get("text")), "")
            messages = [{"role": "user", "content": text}]
            embeds = [np.asarray(p["embedding"], np.float64) for p in parts if "embedding" in p]
        ids = self.codec.encode_chat([{"role": m["role"], "content": m["content"]} for m in messages], True)
        if not ids:
            raise ValueError("nothing to answer")
        with torch.no_grad():
            table = self.model.get_input_embeddings()
            inputs = table(torch.tensor([ids[:-1]]))
            if embeds:
                soft = torch.tensor(np.stack(embeds), dtype=self.soft.dtype) @ self.soft
                inputs = torch.cat([soft[None].to(inputs.dtype), inputs], dim=1)
            kv = self._forward_prefill(inputs) if inputs.shape[1] else self._empty()
        self.live += 1
        return Decoding(kv, ids[-1], int(data.get("max_tokens") or self.max_tokens))

    def decode(self, states: list[Decoding]) -> list[int]:
        longest = max(s.length for s in states)
        layers = len(states[0].kv)
        cache = new_cache(self.model)
        mask = torch.zeros(len(states), longest + 1, dtype=torch.long)
        for layer in range(layers):
            keys, values = [], []
            for s in states:
                k, v = s.kv[layer]
                pad = longest - k.shape[2]
                keys.append(torch.nn.functional.pad(k, (0, 0, pad, 0)))
                values.append(torch.nn.functional.pad(v, (0, 0, pad, 0)))
            cache.update(torch.cat(keys), torch.cat(values), layer)
        for row, s in enumerate(states):
            mask[row, longest - s.length :] = 1
        inputs = torch.tensor([[s.next_input] for s in states])
        positions = torch.tensor([[s.length] for s in states])
        with torch.no_grad():
            out = self.model(
                input_ids=inputs,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                **{self._cache_arg: cache},
            )
        new = out.past_key_values if getattr(out, "past_key_values", None) is not None else cache
        for row, s in enumerate(states):
            s.kv = [
                (
                    torch.cat([s.kv[i][0], new.layers[i].keys[row : row + 1, :, -1:]], dim=2),
                    torch.cat([s.kv[i][1], new.layers[i].values[row : row + 1, :, -1:]], dim=2),
                )
                for i in range(layers)
            ]
        return [int(t) for t in out.logits[:, -1].argmax(-1)]

    def accept(self, state: Decoding, token: int) -> tuple[Values | None, bool]:
        done = token in self.codec.stop_ids
        if not done:
            state.made.append(token)
            state.next_input = token
            done = len(state.made) >= state.max_tokens
        text = self.codec.decode(state.made)
        delta = ""
        # a character split across tokens waits for its last byte, unless the reply ends here
        if (done or not text.endswith("\ufffd")) and text.startswith(state.text):
            delta, state.text = text[len(state.text) :], text
        return ({"text": delta} if delta else None), done

    def result(self, state: Decoding) -> Values:
        return {"text": self.codec.decode(state.made), "tokens": list(state.made)}

    def release(self, state: Decoding) -> None:
        state.kv = []
        self.live -= 1

    def _forward_prefill(self, inputs: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        cache = new_cache(self.model)
        out = self.model(inputs_embeds=inputs, use_cache=True, **{self._cache_arg: cache})
        kv = out.past_key_values if getattr(out, "past_key_values", None) is not None else cache
        return [(layer.keys.clone(), layer.values.clone()) for layer in kv.layers]

    def _empty(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        cfg = self.model.config
        heads = cfg.num_key_value_heads
        dim = cfg.hidden_size // cfg.num_attention_heads
        empty = torch.zeros(1, heads, 0, dim, dtype=self.model.dtype)
        return [(empty, empty) for _ in range(cfg.num_hidden_layers)]


def tiny_llm_stage(spec: StageSpec, settings: Settings) -> ARScheduler[Decoding]:
    torch.set_num_threads(spec.threads)
    model = tiny_causal_lm(seed=settings.tiny_seed)  # the weights the tiny engine holds
    runner = TinyRunner(model, ByteChatCodec(), int(spec.options.get("max_tokens", 64)), settings.tiny_seed)
    return ARScheduler(runner, max_running=spec.batch, info={"model": "tiny"})


def transformers_llm_stage(spec: StageSpec, settings: Settings) -> ARScheduler[Decoding]:
    """Any local Hugging Face causal LM with a chat template (``--model PATH``) on the AR scheduler."""
    if not settings.model:
        raise ValueError("the transformers stage needs --model PATH (a local Hugging Face model)")
    torch.set_num_threads(spec.threads)
    model, codec = load_causal_lm(settings.model, device=settings.device)
    runner = TinyRunner(model, codec, int(spec.options.get("max_tokens", 256)))
    return ARScheduler(runner, max_running=spec.batch, info={"model": settings.model})


def _projection(kind: str, size: int) -> np.ndarray:
    rng = np.random.default_rng(len(kind) * 7919 + size)
    return rng.standard_normal((size, EMBED)) / size**0.5


def encode_audio(values: Values) -> Values:
    audio = np.asarray(values.get("audio", np.zeros(0)), np.float64)
    frames = audio[: len(audio) // 400 * 400].reshape(-1, 400) if len(audio) >= 400 else np.zeros((1, 400))
    energies = np.log1p((frames**2).mean(axis=1))
    pooled = np.interp(np.linspace(0, len(energies) - 1, 32), np.arange(len(energies)), energies)
    return {
        "embedding": (pooled @ _projection("audio", 32)).astype(np.float32),
        "text": values.get("text", ""),
    }


def encode_image(values: Values) -> Values:
    image = np.asarray(values.get("image", np.zeros((8, 8, 3))), np.float64)
    gray = image.mean(axis=2) if image.ndim == 3 else image
    rows = np.array_split(gray, 8, axis=0)
    cells = np.array([[c.mean() if c.size else 0.0 for c in np.array_split(r, 8, axis=1)] for r in rows])
    embedding = (cells.ravel() / 255.0) @ _projection("image", 64)
    return {"embedding": embedding.astype(np.float32), "text": values.get("text", "")}


def tiny_encoder_stage(spec: StageSpec, kind: str) -> SimpleScheduler:
    encode = encode_audio if kind == "audio" else encode_image
    return SimpleScheduler(
        batch_compute=lambda items: [encode(v) for v in items], max_batch=spec.batch, info={"model": kind}
    )
