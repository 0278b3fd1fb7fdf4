"""The tiny engine: a randomly initialised transformer built in-process, for tests and benchmarks.

It is ``TransformersEngine`` unchanged (real ``DynamicCache``, real incremental prefill) over a small
Qwen2 model and a byte-level chat codec, so it needs no hub, no files and no download and builds in
milliseconds. Its replies are noise, but deterministic noise: the same seed gives the same weights,
and float64 weights make an incremental prefill and a full one pick the same greedy tokens.

It also decides full-duplex units (its ``duplex`` role, ``engines.tiny_duplex``) on a second small
model of its own, built from the same seed, with its own cache: a duplex session never touches the
conversation and cache of turn-based streaming, nor its sampling stream.
"""

from __future__ import annotations

import torch

from omnivox.engines.duplex import DuplexModel
from omnivox.engines.hf import TransformersEngine
from omnivox.engines.tiny_duplex import TinyDuplex, TinyDuplexModel
from omnivox.protocol.control.workers import Capabilities
from omnivox.voice.llm.byte_codec import ByteChatCodec
from omnivox.voice.llm.causal_lm import tiny_causal_lm


class TinyEngine(TransformersEngine):
    """A small random Qwen2 behind the byte codec; ``seed`` fixes the weights and the sampling."""

    name = "tiny"
    # vision: duplex frames are seen; image parts of streaming turns are still refused (text codec)
    capabilities = Capabilities(streaming=True, duplex=True, vision=True)
    sees = True

    def __init__(
        self,
        seed: int = 0,
        *,
        hidden_size: int = 64,
        num_layers: int = 2,
        num_heads: int = 4,
        dtype: torch.dtype = torch.float64,
        device: str = "cpu",
    ) -> None:
        model = tiny_causal_lm(
            seed,
            hidden_size=hidden_size,
            num_layers=num_layers,
            num_heads=num_heads,
            dtype=dtype,
            device=device,
        )
        super().__init__(model, ByteChatCodec(), device=device, seed=seed)
        self._seed = seed
        self._shape = (hidden_size, num_layers, num_heads)
        self._dtype = dtype
        self._duplex: TinyDuplex | None = None  # built on first use (or in load)

    def load(self) -> None:
        self._duplex_mode()  # the first duplex session should not pay for building its weights

    def close(self) -> None:
        if self._duplex is not None:
            self._duplex.cleanup()
        super().close()

    @property
    def duplex(self) -> DuplexModel:
        """Full duplex (``engines.tiny_duplex``), on its own model and cache."""
        return self._duplex_mode()

    def _duplex_mode(self) -> TinyDuplex:
        if self._duplex is None:
            hidden, layers, heads = self._shape
            model = TinyDuplexModel(
                self._seed,
                hidden_size=hidden,
                num_layers=layers,
                num_heads=heads,
                dtype=self._dtype,
                device=str(self.device),
            )
            self._duplex = TinyDuplex(model, seed=self._seed)
        return self._duplex
