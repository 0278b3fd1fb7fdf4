"""The relay: arrays through shared memory (same host) or frames, limits, and no leaks."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from omnivox.core.errors import BadPipelineMessage, PayloadLost, PayloadTooLarge, RelayFull
from omnivox.pipeline.messages import ArrayRef, Payload
from omnivox.pipeline.relay import PayloadRelay, segments


def mine() -> list[str]:
    return [s for s in segments() if s.startswith(f"ovx_{os.getpid()}_")]


def test_same_host_arrays_go_through_shared_memory_and_the_reader_frees_them() -> None:
    writer, reader = PayloadRelay(), PayloadRelay()
    audio = np.linspace(-1, 1, 100_000, dtype=np.float32)
    payload, frames = writer.pack({"audio": audio, "small": np.arange(3), "text": "x"}, same_host=True)
    assert payload.arrays["audio"].segment is not None and payload.arrays["small"].segment is None
    assert len(frames) == 1 and len(mine()) == 1
    values = reader.unpack(payload, frames)
    np.testing.assert_array_equal(values["audio"], audio)
    assert values["text"] == "x" and list(values["small"]) == [0, 1, 2]
    assert mine() == []


def test_other_hosts_get_frames_without_a_copy() -> None:
    relay = PayloadRelay()
    audio = np.ones(100_000, np.float32)
    payload, frames = relay.pack({"audio": audio}, same_host=False)
    assert payload.arrays["audio"].segment is None
    assert np.shares_memory(np.frombuffer(frames[0], np.float32), audio)


def test_nested_arrays_keep_their_place() -> None:
    relay = PayloadRelay()
    values = {"a": {"x": np.arange(4)}, "b": {"y": np.zeros((2, 2), np.float32), "n": 1}}
    payload, frames = relay.pack(values, same_host=False)
    out = relay.unpack(payload, frames)
    assert out["b"]["n"] == 1 and out["b"]["y"].shape == (2, 2) and list(out["a"]["x"]) == [0, 1, 2, 3]


def test_an_oversized_payload_is_refused_before_any_copy() -> None:
    relay = PayloadRelay(max_payload_bytes=1000)
    with pytest.raises(PayloadTooLarge):
        relay.pack({"a": np.zeros(1000, np.float32)}, same_host=True)
    assert mine() == []


def test_a_reader_refuses_an_oversized_payload_and_still_frees_it() -> None:
    payload, frames = PayloadRelay().pack({"a": np.zeros(100_000, np.float32)}, same_host=True)
    with pytest.raises(PayloadTooLarge):
        PayloadRelay(max_payload_bytes=1000).unpack(payload, frames)
    assert mine() == []


def test_a_full_relay_refuses_more_until_its_segments_are_read() -> None:
    writer, reader = PayloadRelay(capacity_bytes=1_000_000), PayloadRelay()
    sent = [writer.pack({"a": np.zeros(100_000, np.float32)}, same_host=True) for _ in range(2)]
    with pytest.raises(RelayFull):
        writer.pack({"a": np.zeros(100_000, np.float32)}, same_host=True)
    for payload, frames in sent:
        reader.unpack(payload, frames)
    writer.pack({"a": np.zeros(100_000, np.float32)}, same_host=True)  # room again
    writer.close()
    assert mine() == []


def test_a_segment_that_is_gone_is_payload_lost() -> None:
    writer, reader = PayloadRelay(), PayloadRelay()
    payload, frames = writer.pack({"a": np.zeros(100_000, np.float32)}, same_host=True)
    writer.close()  # unlinks what it wrote and nobody read
    with pytest.raises(PayloadLost):
        reader.unpack(payload, frames)


@pytest.mark.parametrize(
    "ref",
    [
        ArrayRef("object", (1,), 8, frame=0),
        ArrayRef("float32", (3,), 8, frame=0),  # shape and size disagree
        ArrayRef("float32", (2,), 8, frame=5),  # no such frame
        ArrayRef("float32", (2,), 8, segment="../../etc/passwd"),
    ],
)
def test_references_that_do_not_add_up_are_bad_messages(ref: ArrayRef) -> None:
    with pytest.raises(BadPipelineMessage):
        PayloadRelay().unpack(Payload({}, {"a": ref}), [b"\x00" * 8])


def test_segments_of_a_dead_producer_are_swept() -> None:
    code = (
        "import numpy as np; from omnivox.pipeline.relay import PayloadRelay;"
        "p, _ = PayloadRelay().pack({'a': np.zeros(100_000, np.float32)}, same_host=True);"
        "print(p.arrays['a'].segment)"
    )
    name = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert name in segments()  # it outlived its producer (killed before anyone read it)
    assert PayloadRelay().sweep() >= 1
    assert name not in segments()
