"""Pipeline specs: the stages, their schedulers and models, and the graph between them (TOML).

```toml
name = "cascade"
[[stages]]
name = "llm"
scheduler = "parallel"      # simple | streaming | ar | parallel
model = "llamacpp"          # what pipeline.models builds for it
slots = 4                   # requests at once (streaming: fixed slots; parallel: runtime slots)
batch = 1                   # simple / ar: the most requests one compute step takes
next = ["tts", "client"]    # where its result goes ("client": back to whoever submitted)
stream = ["tts", "client"]  # where its stream chunks go (next targets, or the client)
placement = "local"         # local: `serve --pipeline` starts it; remote: `omnivox stage` elsewhere
[stages.options]            # the model's own settings
```

``PipelineSpec.plan`` turns a request's entry and exit stages into a ``messages.Plan``: the part of
the graph between them, each stage's targets, and each stage's inputs (fan-in). Shipped specs live
next to this module (``load_spec("cascade")``); any other is a path to a TOML file.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from omnivox.core.errors import InvalidMessage
from omnivox.pipeline.messages import CLIENT, Plan

SPECS_DIR = Path(__file__).parent / "specs"

SchedulerKind = Literal["simple", "streaming", "ar", "parallel"]


class StageSpec(BaseModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")
    scheduler: SchedulerKind
    model: str
    slots: int = Field(1, ge=1, le=4096)
    batch: int = Field(1, ge=1, le=4096)
    threads: int = Field(1, ge=1, le=256)
    next: list[str] = Field(default_factory=lambda: [CLIENT])
    stream: list[str] = Field(default_factory=list)
    placement: Literal["local", "remote"] = "local"
    # its slots bound the sessions the pipeline serves at once (the ASR: each session holds one for
    # its life); the gateway queues sessions past them
    holds_sessions: bool = False
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("stream")
    @classmethod
    def _stream_within_next(cls, stream: list[str], info: Any) -> list[str]:
        extra = set(stream) - set(info.data.get("next", [])) - {CLIENT}
        if extra:
            raise ValueError(f"stream targets must also be next targets: {sorted(extra)}")
        return stream


class PipelineSpec(BaseModel):
    name: str
    description: str = ""
    stages: list[StageSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _graph(self) -> PipelineSpec:
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError("stage names must be unique")
        if CLIENT in names:
            raise ValueError(f"{CLIENT!r} is not a stage name")
        for stage in self.stages:
            unknown = [t for t in stage.next if t != CLIENT and t not in names]
            if unknown:
                raise ValueError(f"stage {stage.name} sends to unknown stages {unknown}")
            if stage.name in stage.next:
                raise ValueError(f"stage {stage.name} sends to itself")
        self._check_acyclic()
        for stage in self.stages:
            streamed_in = [s.name for s in self.stages if stage.name in s.stream]
            fed = [s.name for s in self.stages if stage.name in s.next]
            if streamed_in and len(fed) > 1:
                raise ValueError(f"stage {stage.name} takes a stream, so it can have only one input")
        return self

    def _check_acyclic(self) -> None:
        edges = {s.name: [t for t in s.next if t != CLIENT] for s in self.stages}
        state: dict[str, int] = {}

        def visit(name: str) -> None:
            state[name] = 1
            for nxt in edges[name]:
                if state.get(nxt) == 1:
                    raise ValueError(f"the stage graph has a cycle through {name} -> {nxt}")
                if nxt not in state:
                    visit(nxt)
            state[name] = 2

        for name in edges:
            if name not in state:
                visit(name)

    # ---- views

    def stage(self, name: str) -> StageSpec:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"pipeline {self.name} has no stage {name!r}")

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.stages]

    @property
    def sources(self) -> list[str]:
        """Stages no other stage feeds: where a request enters by default."""
        fed = {t for s in self.stages for t in s.next}
        return [s.name for s in self.stages if s.name not in fed]

    def plan(
        self, entries: list[str] | None = None, exits: list[str] | None = None, client_host: str = ""
    ) -> Plan:
        """The route of a request entering at ``entries`` (default: the sources) whose result is that
        of ``exits`` (default: the stages that send to the client). ``InvalidMessage`` for a route the
        graph does not have."""
        entries = list(entries or self.sources)
        for name in [*entries, *(exits or [])]:
            if name not in self.names:
                raise InvalidMessage(f"pipeline {self.name} has no stage {name!r}", param="route")
        edges = {s.name: [t for t in s.next if t != CLIENT] for s in self.stages}
        reach = _reachable(edges, entries)
        if exits is None:
            exits = [n for n in reach if CLIENT in self.stage(n).next or not edges[n]]
        if not exits or any(e not in reach for e in exits):
            raise InvalidMessage(f"no route from {entries} to {exits} in pipeline {self.name}", param="route")
        # the stages on some path from an entry to an exit
        back = {n: [m for m in edges if n in edges[m]] for n in edges}
        part = [n for n in self.names if n in reach and n in _reachable(back, list(exits))]
        targets: dict[str, list[str]] = {}
        streams: dict[str, list[str]] = {}
        for name in part:
            spec = self.stage(name)
            on_route = [t for t in spec.next if t in part]
            targets[name] = on_route + ([CLIENT] if name in exits else [])
            streams[name] = [t for t in spec.stream if t in on_route or t == CLIENT]
        inputs = {name: [m for m in part if name in targets[m]] for name in part}
        return Plan(targets, streams, inputs, entries, list(exits), client_host)


def _reachable(edges: dict[str, list[str]], start: list[str]) -> list[str]:
    seen: list[str] = []
    todo = list(start)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        todo.extend(edges[name])
    return seen


def to_toml(spec: PipelineSpec) -> str:
    """The spec as TOML that ``load_spec`` reads back (to hand an adjusted spec to other processes)."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        raise TypeError(f"cannot write {type(v).__name__} to a pipeline spec")

    lines = [f"name = {value(spec.name)}", f"description = {value(spec.description)}"]
    for stage in spec.stages:
        lines.append("\n[[stages]]")
        for key, v in stage.model_dump(exclude={"options"}).items():
            lines.append(f"{key} = {value(v)}")
        if stage.options:
            lines.append("[stages.options]")
            lines.extend(f"{key} = {value(v)}" for key, v in stage.options.items())
    return "\n".join(lines) + "\n"


def shipped_specs() -> list[str]:
    return sorted(p.stem for p in SPECS_DIR.glob("*.toml"))


def load_spec(name_or_path: str) -> PipelineSpec:
    """A shipped spec by name (``cascade``, ``fanin``, ``noop``) or a TOML file by path."""
    path = Path(name_or_path)
    if not path.suffix and (SPECS_DIR / f"{name_or_path}.toml").is_file():
        path = SPECS_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        raise FileNotFoundError(
            f"no pipeline spec {name_or_path!r}: a TOML file, or one of {', '.join(shipped_specs())}"
        )
    with path.open("rb") as f:
        return PipelineSpec.model_validate(tomllib.load(f))
