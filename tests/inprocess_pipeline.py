"""An in-process pipeline: the coordinator and each stage on threads of the test process, talking
over real ZeroMQ sockets on loopback (the real-process version is tests/pipeline_served.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from omnivox.pipeline.builtin import build_builtin
from omnivox.pipeline.client import PipelineClient
from omnivox.pipeline.coordinator import Coordinator
from omnivox.pipeline.scheduler import Scheduler
from omnivox.pipeline.spec import PipelineSpec, StageSpec
from omnivox.pipeline.stage import Stage

BuildStage = Callable[[StageSpec], Scheduler]


def spec_of(*stages: dict, name: str = "test") -> PipelineSpec:
    return PipelineSpec.model_validate({"name": name, "stages": list(stages)})


def builtin(spec: StageSpec) -> Scheduler:
    scheduler = build_builtin(spec)
    assert scheduler is not None, f"{spec.model} is not a builtin model"
    return scheduler


@dataclass
class Running:
    coordinator: Coordinator
    stages: dict[str, Stage] = field(default_factory=dict)
    threads: list[threading.Thread] = field(default_factory=list)
    clients: list[PipelineClient] = field(default_factory=list)

    def client(self, **kwargs) -> PipelineClient:
        c = PipelineClient(self.coordinator.address, **kwargs)
        self.clients.append(c)
        assert c.wait_ready(10)
        return c

    def add_stage(self, spec: StageSpec, build: BuildStage) -> Stage:
        stage = Stage(spec.name, build(spec), self.coordinator.address, heartbeat_s=0.05)
        self.stages[spec.name] = stage
        t = threading.Thread(target=stage.run, daemon=True)
        t.start()
        self.threads.append(t)
        return stage

    def wait_stages(self, names: list[str], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(n in self.coordinator.directory() for n in names):
                return
            time.sleep(0.01)
        raise TimeoutError(f"stages {names} did not register")

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        for stage in self.stages.values():
            stage.stop()
        self.coordinator.stop()
        for t in self.threads:
            t.join(5)


def start_pipeline(spec: PipelineSpec, build: BuildStage = builtin, **kw) -> Running:
    """The coordinator and every stage of ``spec`` running, and registered; ``stop`` them after."""
    coordinator = Coordinator(spec, heartbeat_s=0.05, lost_after_s=kw.pop("lost_after_s", 0.5), **kw)
    t = threading.Thread(target=coordinator.run, daemon=True)
    t.start()
    running = Running(coordinator, threads=[t])
    for stage in spec.stages:
        running.add_stage(stage, build)
    running.wait_stages(spec.names)
    return running
