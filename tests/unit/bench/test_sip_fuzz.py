"""The SIP fuzzer's messages: seeded, each mutation the one it says (found by header name, not by
place), and every message bytes a socket can send."""

from __future__ import annotations

import random

import pytest

from omnivox.bench.sip_fuzz import METHODS, _drain, invite, messages, other

TARGET = ("127.0.0.1", 5060)


class Scripted(random.Random):
    """A seeded generator whose first ``randrange`` answers are given (the mutations to make)."""

    def __init__(self, *answers: int) -> None:
        super().__init__(0)
        self.answers = list(answers)

    def randrange(self, *args, **kwargs):
        return self.answers.pop(0) if self.answers else super().randrange(*args, **kwargs)


def _headers(message: bytes) -> list[str]:
    head = message.decode("utf-8", "surrogatepass").split("\r\n\r\n", 1)[0]
    return head.split("\r\n")[1:]


def _named(headers: list[str], name: str) -> list[str]:
    return [h for h in headers if h.startswith(name + ":")]


def test_an_unmutated_invite_is_well_formed_with_its_sdp_length() -> None:
    msg = invite(Scripted(11, 0), TARGET, 40000, 7)  # SDP kind 11: as is; no mutation
    text = msg.decode()
    head, body = text.split("\r\n\r\n", 1)
    assert head.startswith("INVITE sip:agent@127.0.0.1:5060 SIP/2.0\r\n")
    headers = _headers(msg)
    assert _named(headers, "CSeq") == ["CSeq: 1 INVITE"]
    assert _named(headers, "Call-ID")[0].startswith("Call-ID: fuzz-7-")
    assert _named(headers, "Content-Length") == [f"Content-Length: {len(body.encode())}"]
    assert "m=audio 40002 RTP/AVP 0 8 101" in body  # RTP two ports above the signalling


def test_a_bad_cseq_replaces_the_cseq_and_keeps_the_call_id() -> None:
    msg = invite(Scripted(11, 1, 6, 0), TARGET, 40000, 1)  # one mutation: 6 (CSeq)
    headers = _headers(msg)
    (cseq,) = _named(headers, "CSeq")
    assert cseq != "CSeq: 1 INVITE"
    assert len(_named(headers, "Call-ID")) == 1


def test_a_bad_cseq_after_a_dropped_header_still_replaces_the_cseq() -> None:
    msg = invite(Scripted(11, 2, 0, 0, 6, 0), TARGET, 40000, 1)  # drop Via, then a bad CSeq
    headers = _headers(msg)
    assert len(_named(headers, "CSeq")) == 1 and _named(headers, "CSeq") != ["CSeq: 1 INVITE"]
    assert len(_named(headers, "Call-ID")) == 1 and _named(headers, "Via") == []


def test_a_lying_content_length_after_the_length_was_dropped_keeps_the_content_type() -> None:
    msg = invite(Scripted(11, 2, 0, 8, 3, 0), TARGET, 40000, 1)  # drop Content-Length, then lie
    headers = _headers(msg)
    assert _named(headers, "Content-Type") == ["Content-Type: application/sdp"]
    body = msg.decode().split("\r\n\r\n", 1)[1]
    (length,) = _named(headers, "Content-Length")
    assert length.split(": ", 1)[1] in {"-5", "0", str(10**12), "abc", str(len(body) + 500)}


def test_other_requests_name_a_dialog_that_does_not_exist() -> None:
    for n in range(50):
        msg = other(random.Random(n), TARGET, 40000, n)
        if not msg.startswith(tuple(m.encode() + b" " for m in METHODS)):
            continue  # random bytes
        text = msg.decode()
        method = text.split(" ", 1)[0]
        assert f"CSeq: 2 {method}\r\n" in text and "tag=nobody" in text and text.endswith("\r\n\r\n")


def test_messages_are_seeded_and_mix_invites_with_other_methods() -> None:
    a = list(messages(3, TARGET, 40000, 60))
    assert a == list(messages(3, TARGET, 40000, 60))
    assert a != list(messages(4, TARGET, 40000, 60))
    assert all(isinstance(m, bytes) and m for m in a)
    invites = sum(m.startswith(b"INVITE sip:agent") for m in a)
    assert 0 < invites < len(a)


def test_drain_counts_the_sip_responses_waiting_on_a_socket() -> None:
    import socket

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        b.setblocking(False)
        assert _drain(b) == 0
        for frame in (b"SIP/2.0 403 Forbidden\r\n\r\n", b"garbage", b"SIP/2.0 486 Busy Here\r\n\r\n"):
            a.send(frame)
        assert _drain(b) == 2


@pytest.mark.parametrize("seed", range(30))
def test_every_invite_encodes_whatever_its_mutations(seed) -> None:
    msg = invite(random.Random(seed), TARGET, 40000, seed)
    assert isinstance(msg, bytes) and msg.split(b"\r\n", 1)[0]
