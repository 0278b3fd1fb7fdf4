"""The shipped ``fanin`` spec end to end on its real stage models (threads of this process): two
encoders feed the tiny LLM, which waits for both and decodes with continuous batching."""

from __future__ import annotations

import threading
import time

import numpy as np

from omnivox.core.config import Settings
from omnivox.pipeline.client import PipelineClient
from omnivox.pipeline.coordinator import Coordinator
from omnivox.pipeline.models.registry import build_scheduler
from omnivox.pipeline.spec import load_spec
from omnivox.pipeline.stage import Stage


def test_the_fan_in_example_answers_with_both_encoders() -> None:
    spec = load_spec("fanin")
    coordinator = Coordinator(spec)
    stages = [Stage(s.name, build_scheduler(s, Settings()), coordinator.address) for s in spec.stages]
    threads = [threading.Thread(target=x.run, daemon=True) for x in [coordinator, *stages]]
    for t in threads:
        t.start()
    client = PipelineClient(coordinator.address)
    try:
        deadline = time.monotonic() + 30
        assert client.wait_ready(30)
        while len(coordinator.directory()) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        values = {
            "audio": np.sin(np.arange(16_000) / 7).astype(np.float32),
            "image": np.full((48, 64, 3), 90, np.uint8),
            "text": "what do you see and hear?",
        }
        requests = [client.submit(values) for _ in range(3)]
        results = []
        for request in requests:
            streamed = ""
            for event in request.events():
                if event.kind == "stream":
                    streamed += event.values["text"]
                else:
                    results.append((streamed, event.values))
        assert len(results) == 3
        for streamed, result in results:
            assert result["tokens"] and result["text"] == streamed  # the stream adds up to the result
        assert len({r["text"] for _, r in results}) == 1  # same input, same greedy answer, batched or not
        llm = stages[2].scheduler
        deadline = time.monotonic() + 10
        while llm.load()["kv_states"] and time.monotonic() < deadline:  # released after the result
            time.sleep(0.01)
        assert llm.load()["kv_states"] == 0 and llm.load()["steps"] >= 1
    finally:
        client.close()
        for x in [*stages, coordinator]:
            x.stop()
        for t in threads:
            t.join(5)
