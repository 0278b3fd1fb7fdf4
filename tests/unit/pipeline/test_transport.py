"""Transport helpers: key derivation, socket options, and send/receive over inproc ZeroMQ."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np
import pytest
import zmq
import zmq.utils.z85

from omnivox.core.errors import RelayFull
from omnivox.pipeline import transport
from omnivox.pipeline.messages import Abort, ArrayRef, Payload, Submit, encode
from omnivox.pipeline.transport import HWM, CurveKeys, bind, curve_keys, receive, send, socket

needs_curve = zmq.has("curve")


@pytest.fixture
def ctx() -> Iterator[zmq.Context]:
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


def test_no_key_means_no_curve() -> None:
    assert curve_keys(None) is None
    assert curve_keys("") is None


def test_the_key_pair_is_derived_deterministically_from_the_key() -> None:
    if not needs_curve:  # this libzmq cannot do CURVE: deriving is refused loudly
        with pytest.raises(RuntimeError):
            curve_keys("k")
        return
    one, two = curve_keys("secret"), curve_keys("secret")
    assert one is not None and two is not None
    assert one == two
    other = curve_keys("secret2")
    assert other is not None and other.public != one.public and other.secret != one.secret
    assert len(one.public) == 40 and len(one.secret) == 40  # Z85 of 32 bytes
    expected = zmq.utils.z85.encode(hashlib.sha256(b"omnivox-pipeline\0secret").digest())
    assert one.secret == expected
    assert zmq.curve_public(one.secret) == one.public


def test_the_keys_never_show_in_a_repr() -> None:
    keys = CurveKeys(b"p" * 40, b"s" * 40)
    assert repr(keys) == "CurveKeys(***)"
    assert "s" * 10 not in repr(keys) and "s" * 10 not in str(keys)


def test_socket_options(ctx: zmq.Context) -> None:
    router = socket(ctx, zmq.ROUTER, identity=b"me")
    try:
        assert router.getsockopt(zmq.LINGER) == 0
        assert router.getsockopt(zmq.SNDHWM) == HWM and router.getsockopt(zmq.RCVHWM) == HWM
        assert router.getsockopt(zmq.IDENTITY) == b"me"
    finally:
        router.close()


def test_curve_server_and_client_sockets(ctx: zmq.Context) -> None:
    keys = curve_keys("k") if needs_curve else None
    if keys is None:
        return
    server = socket(ctx, zmq.ROUTER, curve=keys, server=True)
    client = socket(ctx, zmq.DEALER, curve=keys)
    try:
        assert server.getsockopt(zmq.CURVE_SERVER) == 1
        assert client.getsockopt(zmq.CURVE_SERVER) == 0
        address = bind(server, "127.0.0.1")
        client.connect(address)
        send(client, Abort("secure"))  # the handshake completes with the shared key pair
        assert server.poll(5000)
        got = receive(server, routed=True)
        assert got.message == Abort("secure")
    finally:
        server.close()
        client.close()


def test_bind_returns_a_tcp_address_on_a_free_port(ctx: zmq.Context) -> None:
    sock = socket(ctx, zmq.PULL)
    try:
        address = bind(sock, "127.0.0.1")
        assert address.startswith("tcp://127.0.0.1:")
        assert int(address.rsplit(":", 1)[1]) > 0
    finally:
        sock.close()


def pair(ctx: zmq.Context, name: str) -> tuple[zmq.Socket, zmq.Socket]:
    a = socket(ctx, zmq.PAIR)
    b = socket(ctx, zmq.PAIR)
    a.bind(f"inproc://{name}")
    b.connect(f"inproc://{name}")
    return a, b


def test_send_then_receive_a_message_with_its_frames(ctx: zmq.Context) -> None:
    a, b = pair(ctx, "frames")
    try:
        array = np.arange(6, dtype=np.float32)
        payload = Payload({"t": 1}, {"x": ArrayRef("float32", (6,), 24, frame=0)})
        send(a, Submit("r", payload), [memoryview(array).cast("B"), b"tail"])
        assert b.poll(2000)
        got = receive(b)
        assert got.identity is None and got.fd == -1
        assert got.message == Submit("r", payload)
        assert len(got.frames) == 2
        np.testing.assert_array_equal(np.frombuffer(got.frames[0].buffer, np.float32), array)
        assert got.frames[1].bytes == b"tail"
    finally:
        a.close()
        b.close()


def test_a_large_frame_goes_without_a_copy_and_arrives_whole(ctx: zmq.Context) -> None:
    a, b = pair(ctx, "large")
    try:
        big = np.ones(100_000, np.float32)
        send(a, Abort("r"), [memoryview(big).cast("B")])
        assert b.poll(2000)
        got = receive(b)
        assert got.message == Abort("r")
        assert got.frames[0].buffer.nbytes == big.nbytes
    finally:
        a.close()
        b.close()


def test_a_malformed_header_is_dropped_as_data_with_its_frames_kept(ctx: zmq.Context) -> None:
    a, b = pair(ctx, "bad")
    try:
        a.send_multipart([b"\xc1 garbage", b"frame"])
        assert b.poll(2000)
        got = receive(b)
        assert got.message is None
        assert [f.bytes for f in got.frames] == [b"frame"]
    finally:
        a.close()
        b.close()


def test_routed_receive_gives_the_sender_identity(ctx: zmq.Context) -> None:
    router = socket(ctx, zmq.ROUTER)
    dealer = socket(ctx, zmq.DEALER, identity=b"stage-7")
    try:
        router.bind("inproc://routed")
        dealer.connect("inproc://routed")
        send(dealer, Abort("r", "x"))
        assert router.poll(2000)
        got = receive(router, routed=True)
        assert got.identity == b"stage-7"
        assert got.message == Abort("r", "x")
        assert got.frames == []
        send(router, Abort("back"), to=b"stage-7")
        assert dealer.poll(2000)
        assert receive(dealer).message == Abort("back")
    finally:
        router.close()
        dealer.close()


def test_sending_to_an_unknown_peer_is_relay_full_not_a_crash(ctx: zmq.Context) -> None:
    router = socket(ctx, zmq.ROUTER)
    try:
        router.bind("inproc://nobody")
        with pytest.raises(RelayFull):
            send(router, Abort("r"), to=b"nobody-here")
    finally:
        router.close()


def test_a_full_peer_queue_is_relay_full(ctx: zmq.Context) -> None:
    sender = socket(ctx, zmq.PUSH)
    sender.setsockopt(zmq.SNDHWM, 1)
    try:
        sender.bind("inproc://full")  # nobody connects: a PUSH with no peer cannot send
        with pytest.raises(RelayFull):
            send(sender, Abort("r"))
    finally:
        sender.close()


def test_an_empty_routed_message_is_no_message(ctx: zmq.Context) -> None:
    router = socket(ctx, zmq.ROUTER)
    dealer = socket(ctx, zmq.DEALER, identity=b"d")
    try:
        router.bind("inproc://empty")
        dealer.connect("inproc://empty")
        dealer.send(b"")
        assert router.poll(2000)
        got = receive(router, routed=True)
        assert got.identity == b"d" and got.message is None
    finally:
        router.close()
        dealer.close()


def test_the_header_frame_is_the_encoded_message(ctx: zmq.Context) -> None:
    a, b = pair(ctx, "raw")
    try:
        send(a, Abort("r", "why"))
        assert b.poll(2000)
        assert b.recv_multipart() == [encode(Abort("r", "why"))]
    finally:
        a.close()
        b.close()


def test_module_constants() -> None:
    assert transport.HWM > 0 and transport._COPY_BELOW > 0
