"""The fuzzer's frames: seeded, of every kind they claim, and hostile in the way each kind says."""

from __future__ import annotations

import base64
import itertools
import json
import random

import numpy as np
import pytest

from omnivox.bench.fuzz_frames import (
    frames,
    labelled_frames,
    mutate,
    nested_json,
    random_b64,
    random_pcm_b64,
    valid_messages,
)

KINDS = {
    "valid",
    "mutated",
    "unknown_type",
    "truncated",
    "binary",
    "nested",
    "surrogate",
    "scalar",
    "oversized",
}
PROTOCOLS = ("streaming", "duplex", "realtime")


def test_random_b64_decodes_to_the_asked_number_of_bytes() -> None:
    rng = random.Random(1)
    assert [len(base64.b64decode(random_b64(rng, n))) for n in (0, 1, 64)] == [0, 1, 64]


@pytest.mark.parametrize(("dtype", "width", "np_dtype"), [("f4", 4, "<f4"), ("i2", 2, "<i2")])
def test_random_pcm_is_the_asked_samples_of_the_asked_format_within_half_scale(
    dtype, width, np_dtype
) -> None:
    data = base64.b64decode(random_pcm_b64(random.Random(2), 100, dtype))
    assert len(data) == 100 * width
    audio = np.frombuffer(data, np_dtype).astype(np.float64)
    limit = 0.5 if dtype == "f4" else 0.5 * 32767
    assert np.all(np.abs(audio) <= limit) and np.any(audio != 0)


@pytest.mark.parametrize(
    ("protocol", "some_type"),
    [("streaming", "prefill"), ("duplex", "audio_chunk"), ("realtime", "input_audio_buffer.append")],
)
def test_each_protocol_starts_from_its_own_messages(protocol, some_type) -> None:
    msgs = valid_messages(protocol, random.Random(0))
    assert some_type in {m["type"] for m in msgs}
    assert all(isinstance(m["type"], str) for m in msgs)
    json.dumps(msgs)  # every one is JSON


def test_mutation_leaves_the_type_and_the_original_untouched_and_is_seeded() -> None:
    original = {"type": "session.update", "session": {"instructions": "x", "voice": "y"}, "event_id": "e"}
    snapshot = json.dumps(original)
    a = mutate(original, random.Random(5))
    assert json.dumps(original) == snapshot  # a deep copy was mutated
    assert a["type"] == "session.update"
    assert json.dumps(a, sort_keys=True) == json.dumps(mutate(original, random.Random(5)), sort_keys=True)
    changed = [mutate(original, random.Random(s)) for s in range(20)]
    assert any(json.dumps(c, sort_keys=True) != json.dumps(original, sort_keys=True) for c in changed)


def test_a_message_with_only_a_type_gets_an_extra_field() -> None:
    out = mutate({"type": "stop"}, random.Random(3))
    assert out["type"] == "stop" and set(out) == {"type", "extra"}


def test_nested_json_is_valid_at_a_shallow_depth_and_as_deep_as_asked() -> None:
    assert json.loads(nested_json(3)) == {"type": "x", "v": [[[]]]}
    assert nested_json(500).count("[") == 500


def _take(protocol: str, seed: int, n: int):
    return list(itertools.islice(labelled_frames(protocol, seed), n))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_frames_are_seeded_per_protocol_and_seed(protocol) -> None:
    assert _take(protocol, 1, 60) == _take(protocol, 1, 60)
    assert _take(protocol, 1, 60) != _take(protocol, 2, 60)
    assert [f for _, f in _take(protocol, 1, 30)] == list(itertools.islice(frames(protocol, 1), 30))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_kind_shows_and_each_is_what_it_says(protocol) -> None:
    labelled = _take(protocol, 0, 400)
    assert {kind for kind, _ in labelled} == KINDS
    types = {m["type"] for m in valid_messages(protocol, random.Random(0))}
    for kind, frame in labelled:
        if kind == "binary":
            assert isinstance(frame, bytes)
            continue
        assert isinstance(frame, str)
        if kind == "truncated":
            with pytest.raises(json.JSONDecodeError):
                json.loads(frame)
        elif kind == "valid":
            assert json.loads(frame)["type"] in types
        elif kind == "mutated":
            assert json.loads(frame)["type"] in types
        elif kind == "unknown_type":
            assert json.loads(frame)["type"] not in types
        elif kind == "surrogate":
            assert "\\ud800" in frame
        elif kind == "oversized":
            assert len(frame) > 10_000
        elif kind == "scalar":  # JSON, but no object with a string type
            value = json.loads(frame)
            assert not (isinstance(value, dict) and isinstance(value.get("type"), str))
