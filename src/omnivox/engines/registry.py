"""Engines by name. Heavy engines import their libraries only when built."""

from __future__ import annotations

from collections.abc import Callable

from omnivox.core.config import Settings
from omnivox.engines.base import Engine


def _echo(settings: Settings) -> Engine:
    from omnivox.engines.echo import EchoEngine

    return EchoEngine(word_delay_s=settings.echo_delay_s)


def _tiny(settings: Settings) -> Engine:
    from omnivox.engines.tiny import TinyEngine

    return TinyEngine(seed=settings.tiny_seed)


def _transformers(settings: Settings) -> Engine:
    from omnivox.engines.hf import TransformersEngine

    if not settings.model:
        raise ValueError("the transformers engine needs --model PATH (a local Hugging Face model directory)")
    return TransformersEngine.from_pretrained(settings.model, device=settings.device)


ENGINES: dict[str, Callable[[Settings], Engine]] = {
    "echo": _echo,
    "tiny": _tiny,
    "transformers": _transformers,
}


def build_engine(settings: Settings) -> Engine:
    try:
        factory = ENGINES[settings.engine]
    except KeyError:
        raise ValueError(f"unknown engine {settings.engine!r}; choose from {sorted(ENGINES)}") from None
    return factory(settings)
