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


def component_pids(
    gateway: int, workers: list[int], coordinator: int | None, view: dict[str, Any]
) -> dict[str, list[int]]:
    """The serving processes by component: the gateway, the workers, and with a pipeline its
    coordinator and each stage by name (``cpu_by_component`` reads their CPU)."""
    parts = {"gateway": [gateway], "workers": list(workers)}
    if coordinator is not None:
        parts["coordinator"] = [coordinator]
    for stage in view.get("stages", []):
        if stage.get("pid"):
            parts[f"stage {stage['name']}"] = [int(stage["pid"])]
    return parts


def cpu_by_component(parts: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far of each component's processes (the difference of two readings is a run's)."""
    from omnivox.bench.record_flag import cpu_seconds

    return {name: sum(cpu_seconds(pid) for pid in pids) for name, pids in parts.items()}


def cpu_shares(
    before: dict[str, float], after: dict[str, float], wall_s: float, users: int
) -> dict[str, float]:
    """Each component's CPU over a run as a percentage of one core per session."""
    return {name: 100 * (after[name] - before[name]) / wall_s / users for name in before if name in after}


def asr_split(view: dict[str, Any]) -> dict[str, float]:
    """The ASR stage's decode time split into steps that held finals and partials-only steps."""
    for stage in view.get("stages", []):
        load = stage.get("load", {})
        if "final_decode_s" in load:
            keys = (
                "final_decode_s",
                "partial_decode_s",
                "finals",
                "partials",
                "decode_calls",
                "decode_items",
            )
            return {k: float(load[k]) for k in keys}
    return {}
