"""The fuzzer's frames: seeded hostile (and some valid) messages of each WebSocket protocol, and the
pieces every surface's fuzzer mutates with (odd values, deep nesting)."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np


def random_b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()


def random_pcm_b64(rng: random.Random, samples: int, dtype: str) -> str:
    audio = np.asarray([rng.uniform(-0.5, 0.5) for _ in range(samples)], dtype=np.float32)
    data = audio.astype("<f4").tobytes() if dtype == "f4" else (audio * 32767).astype("<i2").tobytes()
    return base64.b64encode(data).decode()


def valid_messages(protocol: str, rng: random.Random) -> list[dict[str, Any]]:
    """Well-formed messages of ``protocol`` the fuzzer starts from (then mutates)."""
    if protocol == "streaming":
        return [
            {"type": "prefill", "messages": [{"role": "user", "content": "hello"}]},
            {"type": "generate", "max_new_tokens": 8},
            {"type": "stop"},
            {
                "type": "prefill",
                "messages": [{"role": "user", "content": [{"type": "audio", "data": random_b64(rng, 64)}]}],
            },
        ]
    if protocol == "duplex":
        return [
            {"type": "prepare", "system_prompt": "hi", "config": {"chunk_ms": 1000}},
            {"type": "audio_chunk", "audio_base64": random_pcm_b64(rng, 1600, "f4")},
            {"type": "audio_chunk", "audio_base64": random_pcm_b64(rng, 1600, "i2"), "format": "pcm16"},
            {
                "type": "audio_chunk",
                "audio_base64": random_pcm_b64(rng, 160, "f4"),
                "frame_base64_list": [random_b64(rng, 32)],
            },
            {"type": "pause", "timeout": 30},
            {"type": "resume"},
            {"type": "client_diagnostic", "metrics": {"x": 1}},
        ]
    return [
        {"type": "session.update", "session": {"type": "realtime", "instructions": "be brief"}},
        {"type": "input_audio_buffer.append", "audio": random_pcm_b64(rng, 240, "i2")},
        {"type": "input_audio_buffer.clear"},
        {"type": "input_audio_buffer.commit"},
        {"type": "conversation.item.create", "item": {"type": "message", "role": "user", "content": []}},
        {"type": "response.cancel"},
        {"type": "conversation.item.delete", "item_id": "nope"},
    ]


ODD_VALUES: list[Callable[[random.Random], Any]] = [
    lambda r: None,
    lambda r: r.randint(-(10**12), 10**12),
    lambda r: int("9" * r.randint(20, 400)),
    lambda r: r.random() * 1e308,
    lambda r: "x" * r.randint(0, 5000),
    lambda r: "\ud800",
    lambda r: [],
    lambda r: {"nested": {"deeper": [1, 2, {"a": None}]}},
    lambda r: True,
    lambda r: random_b64(r, r.randint(0, 300)),
    lambda r: "%%%not base64%%%",
    lambda r: r.choice(["omni", "audio", "", "type", "../../etc/passwd"]),
]


def mutate(msg: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    msg = json.loads(json.dumps(msg))
    keys = [k for k in msg if k != "type"] or ["extra"]
    for _ in range(rng.randint(1, 3)):
        target = msg
        key = rng.choice(keys)
        if isinstance(target.get(key), dict) and target[key] and rng.random() < 0.5:
            target = target[key]
            key = rng.choice(list(target))
        target[key] = rng.choice(ODD_VALUES)(rng)
    return msg


def nested_json(depth: int) -> str:
    return '{"type": "x", "v": ' + "[" * depth + "]" * depth + "}"


def labelled_frames(protocol: str, seed: int) -> Iterator[tuple[str, str | bytes]]:
    """An endless seeded stream of hostile (and some valid) frames for ``protocol``, each with its
    kind (``valid``, ``mutated``, ``unknown_type``, ``truncated``, ``binary``, ``nested``,
    ``surrogate``, ``scalar``, ``oversized``)."""
    rng = random.Random(f"{protocol}-{seed}")
    valid = valid_messages(protocol, rng)
    while True:
        roll = rng.random()
        if roll < 0.25:
            yield "valid", json.dumps(rng.choice(valid))
        elif roll < 0.55:
            yield "mutated", json.dumps(mutate(rng.choice(valid), rng))
        elif roll < 0.62:
            kind = rng.choice(["", "fly", "prefill.x", "session.delete", "__proto__"])
            yield "unknown_type", json.dumps({"type": kind})
        elif roll < 0.70:
            text = json.dumps(rng.choice(valid))
            yield "truncated", text[: rng.randint(0, len(text) - 1)]
        elif roll < 0.76:
            yield "binary", rng.randbytes(rng.randint(0, 2000))
        elif roll < 0.82:
            yield "nested", nested_json(rng.choice([10, 70, 500, 3000]))
        elif roll < 0.88:
            msg = rng.choice(valid)
            yield (
                "surrogate",
                json.dumps({**msg, "type": msg["type"], "event_id": "\ud800" * rng.randint(1, 3)}),
            )
        elif roll < 0.94:
            yield "scalar", rng.choice(["[]", "null", "42", '"str"', "{}", '{"type": 5}', '{"type": null}'])
        else:
            pad = "y" * rng.randint(10_000, 200_000)
            yield "oversized", json.dumps({"type": rng.choice(valid)["type"], "pad": pad})


def frames(protocol: str, seed: int) -> Iterator[str | bytes]:
    """The frames of ``labelled_frames``, without their kinds."""
    for _, frame in labelled_frames(protocol, seed):
        yield frame
