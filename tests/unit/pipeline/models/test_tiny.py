"""The tiny AR runner: continuous batching gives each request exactly what it gets alone."""

from __future__ import annotations

import numpy as np

from omnivox.engines.tiny import TinyEngine
from omnivox.pipeline.models.tiny import TinyRunner, encode_audio, encode_image


def run_alone(runner: TinyRunner, data: dict) -> list[int]:
    state = runner.prefill(data)
    while True:
        (token,) = runner.decode([state])
        _, done = runner.accept(state, token)
        if done:
            out = runner.result(state)["tokens"]
            runner.release(state)
            return out


def test_batched_decode_steps_match_each_request_alone() -> None:
    engine = TinyEngine(seed=3)
    runner = TinyRunner(engine.model, engine.codec, max_tokens=12)
    requests = [
        {"messages": [{"role": "user", "content": "hi"}]},
        {"messages": [{"role": "user", "content": "a much longer question than the first"}], "max_tokens": 7},
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "ok?"}]},
    ]
    alone = [run_alone(runner, r) for r in requests]
    # together, the second joining after two steps of the others
    states = {0: runner.prefill(requests[0]), 2: runner.prefill(requests[2])}
    done: dict[int, list[int]] = {}
    step = 0
    while states:
        if step == 2:
            states[1] = runner.prefill(requests[1])
        keys = sorted(states)
        tokens = runner.decode([states[k] for k in keys])
        for k, token in zip(keys, tokens, strict=True):
            _, finished = runner.accept(states[k], token)
            if finished:
                done[k] = runner.result(states[k])["tokens"]
                runner.release(states.pop(k))
        step += 1
    assert [done[i] for i in range(3)] == alone
    assert runner.live == 0


def test_the_fan_in_llm_takes_both_encoders_embeddings() -> None:
    engine = TinyEngine(seed=3)
    runner = TinyRunner(engine.model, engine.codec, max_tokens=5)
    audio = encode_audio({"audio": np.sin(np.arange(16_000) / 10).astype(np.float32), "text": "look"})
    image = encode_image({"image": np.full((32, 32, 3), 200, np.uint8), "text": "look"})
    assert audio["embedding"].shape == image["embedding"].shape == (16,)
    with_media = run_alone(runner, {"audio_encoder": audio, "image_encoder": image})
    state = runner.prefill({"audio_encoder": audio, "image_encoder": image})
    assert state.length > runner.prefill({"messages": [{"role": "user", "content": "look"}]}).length
    assert len(with_media) >= 1
