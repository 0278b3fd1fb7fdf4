"""Standard Webhooks signatures: the specification's own test vector, and forged headers."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from omnivox.telephony import webhooks

# the Standard Webhooks specification's example (as its reference libraries test it)
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TS = 1614265330
BODY = b'{"test": 2432232314}'
SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def headers(**over: str) -> dict[str, str]:
    return {
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(TS),
        "webhook-signature": SIGNATURE,
        **over,
    }


def test_the_specifications_vector_signs_and_verifies() -> None:
    assert webhooks.signature(SECRET, MSG_ID, TS, BODY) == SIGNATURE
    assert webhooks.sign(SECRET, MSG_ID, BODY, timestamp=TS) == headers()
    assert webhooks.verify(SECRET, headers(), BODY, now=TS)


def test_one_of_several_signatures_is_enough() -> None:
    # a rotating secret: the header lists a signature per secret, space-separated
    assert webhooks.verify(SECRET, headers(**{"webhook-signature": f"v1,AAAA {SIGNATURE}"}), BODY, now=TS)


def test_the_timestamp_may_be_off_by_the_tolerance_either_way() -> None:
    assert webhooks.verify(SECRET, headers(), BODY, now=TS + webhooks.TOLERANCE_S)
    assert webhooks.verify(SECRET, headers(), BODY, now=TS - webhooks.TOLERANCE_S)
    assert not webhooks.verify(SECRET, headers(), BODY, now=TS + webhooks.TOLERANCE_S + 1)
    assert not webhooks.verify(SECRET, headers(), BODY, now=TS - webhooks.TOLERANCE_S - 1)


def test_a_secret_without_the_prefix_or_not_base64_is_used_as_it_is() -> None:
    def mac(key: bytes) -> str:
        return "v1," + base64.b64encode(hmac.new(key, b"m.1.x", hashlib.sha256).digest()).decode()

    assert webhooks.signature("plain secret", "m", 1, b"x") == mac(b"plain secret")
    assert webhooks.signature("whsec_***", "m", 1, b"x") == mac(b"whsec_***")
    assert webhooks.signature("whsec_c2VjcmV0", "m", 1, b"x") == mac(b"secret")  # base64 of the key


@pytest.mark.parametrize(
    "bad",
    [
        {"webhook-id": "msg_other"},  # the id is signed
        {"webhook-timestamp": str(TS + 1)},  # and the time
        {"webhook-signature": SIGNATURE.replace("v1,", "v1a,")},
        {"webhook-signature": SIGNATURE[:-2]},
        {"webhook-signature": "v1,é"},  # non-ASCII: refused, never an exception
        {"webhook-timestamp": "²"},  # a digit to str.isdigit, no number to int()
        {"webhook-timestamp": "-1"},
        {"webhook-timestamp": "1e9"},
        {"webhook-timestamp": ""},
        {"webhook-id": ""},
        {"webhook-signature": ""},
    ],
)
def test_forged_or_malformed_headers_are_refused(bad: dict[str, str]) -> None:
    assert not webhooks.verify(SECRET, headers(**bad), BODY, now=TS)


def test_missing_headers_or_another_body_are_refused() -> None:
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        assert not webhooks.verify(SECRET, {k: v for k, v in headers().items() if k != name}, BODY, now=TS)
    assert not webhooks.verify(SECRET, headers(), BODY + b" ", now=TS)
    assert not webhooks.verify("whsec_" + "A" * 32, headers(), BODY, now=TS)
