"""bench fuzz's frame generators: seeded, endless, hostile, and starting from messages the real
protocols accept."""

from __future__ import annotations

import base64
import itertools
import json
import random

import numpy as np
import pytest

from omnivox.bench import fuzz


def take(protocol: str, seed: int, n: int) -> list[str | bytes]:
    return list(itertools.islice(fuzz.frames(protocol, seed), n))


# ---- the valid messages


@pytest.mark.parametrize("protocol", fuzz.PROTOCOLS)
def test_every_protocol_has_valid_messages_with_a_type(protocol):
    msgs = fuzz.valid_messages(protocol, random.Random(0))
    assert msgs and all(isinstance(m["type"], str) and m["type"] for m in msgs)
    json.dumps(msgs)  # plain JSON


def test_the_streaming_messages_parse_as_the_streaming_protocol():
    from omnivox.protocol import streaming as sp

    for msg in fuzz.valid_messages("streaming", random.Random(0)):
        parsed = sp.STREAMING.parser(json.dumps(msg), 1 << 20)
        assert parsed.type == msg["type"]


def test_the_realtime_messages_have_realtime_client_types():
    types = {m["type"] for m in fuzz.valid_messages("realtime", random.Random(0))}
    assert "session.update" in types and "input_audio_buffer.append" in types
    assert all("." in t for t in types)


def test_the_duplex_audio_is_float32_or_pcm16_as_labelled():
    msgs = fuzz.valid_messages("duplex", random.Random(3))
    chunks = [m for m in msgs if m["type"] == "audio_chunk"]
    f32 = np.frombuffer(base64.b64decode(chunks[0]["audio_base64"]), "<f4")
    i16 = np.frombuffer(base64.b64decode(chunks[1]["audio_base64"]), "<i2")
    assert chunks[1]["format"] == "pcm16" and "format" not in chunks[0]
    assert len(f32) == len(i16) == 1600
    assert np.all(np.abs(f32) <= 0.5) and np.all(np.abs(i16) <= 0.5 * 32767 + 1)


def test_pcm_helper_sizes_and_b64_helper_lengths():
    rng = random.Random(0)
    assert len(base64.b64decode(fuzz.random_pcm_b64(rng, 10, "f4"))) == 40
    assert len(base64.b64decode(fuzz.random_pcm_b64(rng, 10, "i2"))) == 20
    assert len(base64.b64decode(fuzz.random_b64(rng, 33))) == 33
    assert fuzz.random_b64(rng, 0) == ""


# ---- mutations


def test_mutate_keeps_the_type_and_leaves_the_original_alone():
    rng = random.Random(1)
    original = {"type": "prefill", "messages": [{"role": "user", "content": "hello"}], "n": 1}
    before = json.dumps(original)
    for _ in range(200):
        mutated = fuzz.mutate(original, rng)
        assert mutated["type"] == "prefill"
    assert json.dumps(original) == before


def test_mutate_changes_something():
    rng = random.Random(2)
    original = {"type": "generate", "max_new_tokens": 8}
    changed = sum(fuzz.mutate(original, rng) != original for _ in range(100))
    assert changed > 50  # an odd value may happen to be the same one now and then, rarely


def test_a_message_with_only_a_type_gains_an_extra_field():
    mutated = fuzz.mutate({"type": "stop"}, random.Random(0))
    assert set(mutated) == {"type", "extra"}


def test_mutate_reaches_into_nested_objects():
    rng = random.Random(5)
    original = {"type": "session.update", "session": {"type": "realtime", "instructions": "x"}}
    nested_changes = 0
    for _ in range(200):
        m = fuzz.mutate(original, rng)
        if isinstance(m["session"], dict) and m["session"] != original["session"]:
            nested_changes += 1
    assert nested_changes > 0


def test_every_odd_value_can_be_made():
    rng = random.Random(0)
    values = [make(rng) for make in fuzz.ODD_VALUES]
    assert None in values and "\ud800" in values and [] in values and True in values
    assert any(isinstance(v, int) and not isinstance(v, bool) and v > 10**19 for v in values)


def test_nested_is_json_of_the_given_depth():
    text = fuzz.nested_json(3)
    assert text == '{"type": "x", "v": [[[]]]}'
    assert json.loads(fuzz.nested_json(50))["type"] == "x"


# ---- the stream of frames


@pytest.mark.parametrize("protocol", fuzz.PROTOCOLS)
def test_frames_are_deterministic_per_seed(protocol):
    assert take(protocol, 7, 60) == take(protocol, 7, 60)
    assert take(protocol, 7, 60) != take(protocol, 8, 60)


def test_protocols_get_different_streams_for_one_seed():
    assert take("streaming", 0, 30) != take("duplex", 0, 30)


@pytest.mark.parametrize("protocol", fuzz.PROTOCOLS)
def test_the_stream_mixes_valid_broken_and_binary_frames(protocol):
    frames = take(protocol, 0, 400)
    binary = [f for f in frames if isinstance(f, bytes)]
    texts = [f for f in frames if isinstance(f, str)]
    assert binary and texts
    parsed = sum(_parses(t) for t in texts)
    broken = len(texts) - parsed  # truncated JSON, or nesting too deep for a recursive parser
    assert parsed > broken > 0
    valid_types = {m["type"] for m in fuzz.valid_messages(protocol, random.Random(0))}
    as_sent = [json.loads(t) for t in texts if t.startswith("{") and _parses(t)]
    assert any(isinstance(m, dict) and m.get("type") in valid_types for m in as_sent)
    assert any(not isinstance(m, dict) or m.get("type") not in valid_types for m in as_sent)


def test_the_stream_holds_oversized_and_surrogate_frames():
    frames = [f for f in take("realtime", 0, 1000) if isinstance(f, str)]
    assert any(len(f) > 10_000 for f in frames)
    assert any("\\ud800" in f for f in frames)  # json.dumps escapes the lone surrogate
    assert any(f.count("[") >= 500 for f in frames)  # nesting deeper than a recursive parser takes


def test_the_stream_never_ends():
    source = fuzz.frames("duplex", 1)
    for _ in range(2000):
        next(source)


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


# ---- where frames go, and the stats


def test_paths():
    assert fuzz.session_path("streaming", 3) == "/ws/streaming/fuzz-3"
    assert fuzz.session_path("duplex", 0) == "/ws/duplex/fuzz-0"
    assert fuzz.session_path("realtime", 9) == "/v1/realtime"


def test_session_ids_in_paths_are_ones_the_gateway_accepts():
    from omnivox.core.ids import check_session_id

    for protocol in ("streaming", "duplex"):
        check_session_id(fuzz.session_path(protocol, 12345).rsplit("/", 1)[1])


def test_fuzz_stats_start_at_zero_and_own_their_list():
    a, b = fuzz.FuzzStats(), fuzz.FuzzStats()
    a.failed_checks.append("x")
    assert b.failed_checks == [] and b.frames == b.errors == b.reconnects == 0 and b.seconds == 0.0


def test_defaults_fuzz_every_protocol():
    import argparse

    parser = argparse.ArgumentParser()
    fuzz.add_arguments(parser)
    args = parser.parse_args([])
    assert args.protocols == list(fuzz.PROTOCOLS) and args.frames == 2000 and args.check_every == 100
