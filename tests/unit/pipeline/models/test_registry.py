"""The stage models by name: the builtin ones, refusals that name the known models, schedulers
checked before any model loads."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.core.config import Settings
from omnivox.pipeline.models.registry import MODELS, build_scheduler
from omnivox.pipeline.schedulers.ar import ARScheduler
from omnivox.pipeline.schedulers.parallel import ParallelScheduler
from omnivox.pipeline.schedulers.simple import SimpleScheduler
from omnivox.pipeline.schedulers.streaming import StreamingScheduler
from omnivox.pipeline.spec import StageSpec


def stage(model: str, scheduler: str, **kw) -> StageSpec:
    return StageSpec.model_validate({"name": "s", "scheduler": scheduler, "model": model, **kw})


@pytest.mark.parametrize(
    ("model", "scheduler", "kind"),
    [
        ("noop", "simple", SimpleScheduler),
        ("noop", "parallel", ParallelScheduler),
        ("echo", "streaming", StreamingScheduler),
        ("count", "ar", ARScheduler),
        ("fail", "simple", SimpleScheduler),
    ],
)
def test_registry_builds_the_builtin_models(model: str, scheduler: str, kind: type) -> None:
    s = build_scheduler(stage(model, scheduler), Settings())
    try:
        assert isinstance(s, kind) and s.info["model"] == model
    finally:
        s.outbox.close()


def test_registry_refuses_an_unknown_model_naming_the_known_ones() -> None:
    with pytest.raises(ValueError) as info:
        build_scheduler(stage("gpt-17", "simple"), Settings())
    assert "gpt-17" in str(info.value) and "whisper" in str(info.value) and "noop" in str(info.value)


@pytest.mark.parametrize(("model", "kinds"), [(m, k) for m, (k, _) in MODELS.items()])
def test_registry_refuses_a_model_on_the_wrong_scheduler_before_loading(model: str, kinds: tuple) -> None:
    wrong = next(k for k in ("simple", "streaming", "ar", "parallel") if k not in kinds)
    with pytest.raises(ValueError) as info:
        build_scheduler(stage(model, wrong), Settings())
    assert " or ".join(kinds) in str(info.value)


def test_registry_builds_the_tiny_encoders_without_a_model() -> None:
    s = build_scheduler(stage("tiny_audio_encoder", "simple", batch=3), Settings())
    try:
        assert isinstance(s, SimpleScheduler) and s.info == {"model": "audio"} and s.max_batch == 3
        assert s.batch_compute is not None
        (out,) = s.batch_compute([{"audio": np.ones(1600, np.float32), "text": "hey"}])
        assert (
            out["text"] == "hey" and out["embedding"].shape == (16,) and out["embedding"].dtype == np.float32
        )
    finally:
        s.outbox.close()
