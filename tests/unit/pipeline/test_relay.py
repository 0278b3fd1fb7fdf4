"""The relay: arrays through shared memory (same host) or frames, limits, and no leaks."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from omnivox.core.errors import BadPipelineMessage, PayloadLost, PayloadTooLarge, RelayFull
from omnivox.pipeline.messages import ArrayRef, Payload
from omnivox.pipeline.relay import DTYPES, PayloadRelay, host_id, relay_from, segments


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


@pytest.fixture(autouse=True)
def no_leaks():
    before = set(mine())
    yield
    assert set(mine()) <= before


def test_empty_and_none_values_make_an_empty_payload() -> None:
    relay = PayloadRelay()
    assert relay.pack(None, same_host=True) == (Payload(), [])
    assert relay.pack({}, same_host=False) == (Payload(), [])
    assert relay.unpack(Payload(), []) == {}


def test_meta_only_values_round_trip_without_frames() -> None:
    relay = PayloadRelay()
    payload, frames = relay.pack({"text": "hi", "n": 1, "d": {"k": [1, 2]}}, same_host=False)
    assert frames == [] and payload.arrays == {}
    assert relay.unpack(payload, frames) == {"text": "hi", "n": 1, "d": {"k": [1, 2]}}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_every_allowed_dtype_round_trips_through_frames(dtype: str) -> None:
    relay = PayloadRelay()
    array = (np.arange(12) % 2).astype(dtype).reshape(3, 4)
    payload, frames = relay.pack({"a": array}, same_host=False)
    out = relay.unpack(payload, [bytes(f) for f in frames])["a"]
    assert out.dtype == array.dtype and out.shape == (3, 4)
    np.testing.assert_array_equal(out, array)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_every_allowed_dtype_round_trips_through_shared_memory(dtype: str) -> None:
    writer, reader = PayloadRelay(shm_min_bytes=1), PayloadRelay()
    array = (np.arange(64) % 3).astype(dtype)
    payload, frames = writer.pack({"a": array}, same_host=True)
    if writer.use_shm:
        assert payload.arrays["a"].segment is not None and frames == []
        assert writer.segments_created == 1
    np.testing.assert_array_equal(reader.unpack(payload, frames)["a"], array)


@pytest.mark.parametrize("value", [np.array(["a", "b"]), np.array([object()]), np.zeros(2, np.complex64)])
def test_arrays_of_other_dtypes_are_refused_when_packing(value: np.ndarray) -> None:
    with pytest.raises(TypeError):
        PayloadRelay().pack({"a": value}, same_host=False)


def test_a_non_contiguous_array_is_packed_as_its_values() -> None:
    relay = PayloadRelay()
    array = np.arange(20, dtype=np.int32).reshape(4, 5)[:, ::2]
    assert not array.flags.c_contiguous
    payload, frames = relay.pack({"a": array}, same_host=False)
    np.testing.assert_array_equal(relay.unpack(payload, frames)["a"], array)


def test_empty_arrays_keep_their_shape() -> None:
    writer, reader = PayloadRelay(shm_min_bytes=1), PayloadRelay()
    values = {"empty": np.zeros((0, 3), np.float32), "one": np.array([7], np.int64)}
    for same_host in (False, True):
        payload, frames = writer.pack(values, same_host=same_host)
        out = reader.unpack(payload, frames)
        assert out["empty"].shape == (0, 3) and out["empty"].dtype == np.float32
        assert out["one"].shape == (1,) and int(out["one"][0]) == 7


def test_received_arrays_are_read_only() -> None:
    writer, reader = PayloadRelay(), PayloadRelay()
    big = np.ones(50_000, np.float32)
    payload, frames = writer.pack({"big": big, "small": np.arange(3)}, same_host=True)
    out = reader.unpack(payload, [bytes(f) for f in frames])
    for key in ("big", "small"):
        with pytest.raises(ValueError):
            out[key][0] = 5


def test_a_payload_exactly_at_the_limit_passes_and_one_byte_more_does_not() -> None:
    relay = PayloadRelay(max_payload_bytes=100)
    payload, frames = relay.pack({"a": np.zeros(100, np.uint8)}, same_host=False)
    assert relay.unpack(payload, frames)["a"].nbytes == 100
    with pytest.raises(PayloadTooLarge) as info:
        relay.pack({"a": np.zeros(60, np.uint8), "b": np.zeros(41, np.uint8)}, same_host=False)
    assert info.value.code == "payload_too_large"


def test_the_limit_counts_arrays_nested_in_dicts() -> None:
    relay = PayloadRelay(max_payload_bytes=100)
    with pytest.raises(PayloadTooLarge):
        relay.pack({"x": {"a": np.zeros(80, np.uint8)}, "y": {"b": np.zeros(80, np.uint8)}}, same_host=False)
    assert relay.bytes_sent == 0


def test_bytes_sent_counts_array_bytes() -> None:
    relay = PayloadRelay()
    relay.pack({"a": np.zeros(10, np.float32), "t": "x"}, same_host=False)
    relay.pack({"b": np.zeros(3, np.int16)}, same_host=False)
    assert relay.bytes_sent == 46


def test_a_relay_without_shared_memory_always_uses_frames() -> None:
    relay = PayloadRelay(use_shm=False)
    payload, frames = relay.pack({"a": np.zeros(100_000, np.float32)}, same_host=True)
    assert payload.arrays["a"].segment is None and len(frames) == 1
    assert relay.segments_created == 0


def test_relay_from_settings() -> None:
    settings = SimpleNamespace(
        relay_max_payload_bytes=123, relay_capacity_bytes=456, relay_shared_memory=False
    )
    relay = relay_from(settings)
    assert relay.max_payload_bytes == 123 and relay.capacity_bytes == 456 and relay.use_shm is False


def test_host_id_is_stable_and_short() -> None:
    assert host_id() == host_id()
    assert len(host_id()) == 16 and int(host_id(), 16) >= 0


def test_a_lost_segment_still_lets_the_others_be_consumed() -> None:
    writer, reader = PayloadRelay(), PayloadRelay()
    payload, frames = writer.pack(
        {"a": np.zeros(100_000, np.float32), "b": np.ones(100_000, np.float32)}, same_host=True
    )
    if not writer.use_shm:
        return
    os.unlink(f"/dev/shm/{payload.arrays['a'].segment}")  # its producer's sweep took it
    with pytest.raises(PayloadLost) as info:
        reader.unpack(payload, frames)
    assert info.value.code == "payload_lost"
    assert payload.arrays["b"].segment not in segments()  # consumed anyway


def test_an_oversized_payload_on_read_frees_every_segment() -> None:
    writer = PayloadRelay()
    payload, frames = writer.pack(
        {"a": np.zeros(100_000, np.float32), "b": {"c": np.zeros(100_000, np.float32)}}, same_host=True
    )
    with pytest.raises(PayloadTooLarge):
        PayloadRelay(max_payload_bytes=10).unpack(payload, frames)
    assert mine() == []


def test_discard_consumes_segments_unread() -> None:
    writer = PayloadRelay()
    payload, _ = writer.pack({"a": np.zeros(100_000, np.float32)}, same_host=True)
    PayloadRelay().discard(payload)
    PayloadRelay().discard(None)
    PayloadRelay().discard(payload)  # twice is harmless
    assert mine() == []
    assert writer.outstanding_bytes() == 0


def test_discard_ignores_names_that_are_not_relay_segments(tmp_path) -> None:
    victim = tmp_path / "keep.txt"
    victim.write_text("x")
    PayloadRelay().discard(Payload({}, {"a": ArrayRef("uint8", (1,), 1, segment=str(victim))}))
    assert victim.exists()


def test_outstanding_bytes_track_unread_segments() -> None:
    writer, reader = PayloadRelay(), PayloadRelay()
    one = writer.pack({"a": np.zeros(100_000, np.float32)}, same_host=True)
    two = writer.pack({"a": np.zeros(50_000, np.float32)}, same_host=True)
    if not writer.use_shm:
        return
    assert writer.outstanding_bytes() == 600_000
    reader.unpack(*one)
    assert writer.outstanding_bytes() == 200_000
    reader.unpack(*two)
    assert writer.outstanding_bytes() == 0


def test_the_capacity_is_relay_full_as_data_and_frames_are_not_counted() -> None:
    writer = PayloadRelay(capacity_bytes=500_000)
    kept = writer.pack({"a": np.zeros(100_000, np.float32)}, same_host=True)
    if not writer.use_shm:
        return
    with pytest.raises(RelayFull) as info:
        writer.pack({"a": np.zeros(100_000, np.float32)}, same_host=True)
    assert info.value.code == "relay_full"
    writer.pack({"a": np.zeros(100_000, np.float32)}, same_host=False)  # frames need no capacity
    PayloadRelay().unpack(*kept)


def test_close_unlinks_whatever_is_unread() -> None:
    writer = PayloadRelay()
    payload, frames = writer.pack({"a": np.zeros(100_000, np.float32)}, same_host=True)
    writer.close()
    assert mine() == [] and writer.outstanding_bytes() == 0
    if writer.use_shm:
        with pytest.raises(PayloadLost):
            PayloadRelay().unpack(payload, frames)


def test_sweep_unlinks_own_orphans_only_once_they_are_old() -> None:
    writer = PayloadRelay(orphan_after_s=3600)
    writer.pack({"a": np.zeros(100_000, np.float32)}, same_host=True)
    if not writer.use_shm:
        return
    writer.sweep()
    assert len(mine()) == 1  # young: kept
    writer.orphan_after_s = -1.0
    assert writer.sweep() >= 1
    assert mine() == []


@pytest.mark.parametrize(
    "ref",
    [
        ArrayRef("float32", (-1,), 4, frame=0),  # a negative dimension
        ArrayRef("float32", (2,), 8, frame=-1),  # neither a frame nor a segment
        ArrayRef("int64", (1,), 8, frame=0),  # the frame holds 4 bytes, not 8
        ArrayRef("float32", (1,), 4, segment="ovx_1_2_nothex00"),  # not a relay name
        ArrayRef("float32", (1,), 4, segment="/dev/shm/ovx_1_2_0123abcd"),
        ArrayRef("str", (1,), 4, frame=0),
    ],
)
def test_more_references_that_do_not_add_up(ref: ArrayRef) -> None:
    with pytest.raises(BadPipelineMessage):
        PayloadRelay().unpack(Payload({}, {"a": ref}), [b"\x00" * 4])


def test_a_segment_smaller_than_its_reference_is_refused_and_consumed() -> None:
    writer = PayloadRelay()
    payload, _ = writer.pack({"a": np.zeros(10_000, np.float32)}, same_host=True)
    if not writer.use_shm:
        return
    ref = payload.arrays["a"]
    lying = Payload({}, {"a": ArrayRef("float32", (20_000,), 80_000, segment=ref.segment)})
    with pytest.raises(BadPipelineMessage):
        PayloadRelay().unpack(lying, [])
    assert ref.segment not in segments()


def test_a_missing_segment_of_a_valid_name_is_payload_lost() -> None:
    ref = ArrayRef("float32", (1,), 4, segment="ovx_999999_0_0123abcd")
    with pytest.raises(PayloadLost):
        PayloadRelay().unpack(Payload({}, {"a": ref}), [])


def test_unpacked_meta_is_not_the_payload_meta() -> None:
    relay = PayloadRelay()
    payload, frames = relay.pack({"text": "x", "a": np.arange(2)}, same_host=False)
    out = relay.unpack(payload, frames)
    out["text"] = "changed"
    assert payload.meta == {"text": "x"}


@pytest.mark.parametrize("same_host", [True, False])
def test_a_scalar_array_keeps_its_zero_dimensions(same_host: bool) -> None:
    writer, reader = PayloadRelay(shm_min_bytes=0), PayloadRelay()
    payload, frames = writer.pack({"a": np.array(7, np.int64)}, same_host=same_host)
    out = reader.unpack(payload, [bytes(f) for f in frames])["a"]
    assert out.shape == () and int(out) == 7


def test_an_empty_array_never_becomes_a_segment() -> None:
    writer, reader = PayloadRelay(shm_min_bytes=0), PayloadRelay()
    payload, frames = writer.pack({"a": np.zeros((0, 3), np.float32)}, same_host=True)
    assert payload.arrays["a"].segment is None and writer.segments_created == 0
    assert reader.unpack(payload, [bytes(f) for f in frames])["a"].shape == (0, 3)
