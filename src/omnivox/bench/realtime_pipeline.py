"""``bench realtime --pipeline SPEC``: the run's spec (slots raised to the callers), and what the
shared stages report (memory, the ASR stage's batch occupancy)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any


def add_pipeline_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pipeline",
        help="a pipeline spec (cascade): light workers share its stages instead of each loading the models",
    )
    parser.add_argument(
        "--slots", type=int, help="pipeline: ASR and TTS slots (default: the spec's, at least the callers)"
    )
    parser.add_argument("--llm-slots", type=int, help="pipeline: the LLM stage's parallel slots")


def pipeline_spec(args: argparse.Namespace, users: int, log_dir: Path | None) -> str:
    """The spec the run uses: the named one, with its slots raised to the callers (or ``--slots``)."""
    from omnivox.pipeline.spec import load_spec, to_toml

    spec = load_spec(args.pipeline)
    for stage in spec.stages:
        if stage.scheduler == "streaming":
            stage.slots = args.slots or max(stage.slots, users)
        elif stage.name == "llm" and args.llm_slots:
            stage.slots = args.llm_slots
    folder = log_dir or Path(tempfile.mkdtemp(prefix="omnivox-bench-"))
    path = folder / f"{spec.name}-{users}.toml"
    path.write_text(to_toml(spec))
    return str(path)


def asr_batch(view: dict[str, Any]) -> str:
    """The mean (and largest) number of transcripts per batched decode of the ASR stage."""
    for stage in view.get("stages", []):
        load = stage.get("load", {})
        if load.get("decode_calls"):
            mean = load["decode_items"] / load["decode_calls"]
            return f"{mean:.2f} (max {load['decode_max_batch']:.0f})"
    return "–"


def stage_pids(view: dict[str, Any]) -> list[int]:
    return [int(s["pid"]) for s in view.get("stages", []) if s.get("pid")]
