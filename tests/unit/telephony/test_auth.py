import hashlib

from omnivox.telephony import webhooks
from omnivox.telephony.carriers import twilio
from omnivox.telephony.digest import DigestAuth


def md5(s: str) -> str:
    return hashlib.md5(s.encode()).hexdigest()


def answer(auth: DigestAuth, user: str, password: str, nonce: str) -> str:
    ha1, ha2 = md5(f"{user}:omnivox:{password}"), md5("INVITE:sip:agent@host")
    response = md5(f"{ha1}:{nonce}:00000001:c1:auth:{ha2}")
    return (
        f'Digest username="{user}", realm="omnivox", nonce="{nonce}", uri="sip:agent@host", '
        f'qop=auth, nc=00000001, cnonce="c1", response="{response}"'
    )


def test_digest_takes_right_credentials_and_refuses_the_rest():
    now = [1000.0]
    auth = DigestAuth("omnivox", {"trunk": "pw"}, clock=lambda: now[0])
    nonce = auth.challenge().split('nonce="')[1].split('"')[0]
    assert auth.check("INVITE", answer(auth, "trunk", "pw", nonce)) == "trunk"
    assert auth.check("INVITE", answer(auth, "trunk", "wrong", nonce)) is None
    assert auth.check("INVITE", answer(auth, "nobody", "pw", nonce)) is None
    assert auth.check("INVITE", answer(auth, "trunk", "pw", "1.forged")) is None
    assert auth.check("INVITE", None) is None and auth.check("INVITE", "Basic abc") is None
    now[0] += 1000  # the nonce went stale
    assert auth.check("INVITE", answer(auth, "trunk", "pw", nonce)) is None


def test_standard_webhooks_signatures_verify_and_reject_tampering():
    secret = "whsec_" + "c2VjcmV0LWtleS1ieXRlcw=="
    headers = webhooks.sign(secret, "msg_1", b'{"a":1}', timestamp=1_700_000_000)
    assert webhooks.verify(secret, headers, b'{"a":1}', now=1_700_000_010)
    assert not webhooks.verify(secret, headers, b'{"a":2}', now=1_700_000_010)
    assert not webhooks.verify(secret, headers, b'{"a":1}', now=1_700_001_000)  # too old
    assert not webhooks.verify("whsec_other", headers, b'{"a":1}', now=1_700_000_010)


def test_twilio_signatures_cover_the_url_and_the_sorted_parameters():
    # Twilio's documented example: url + each parameter's name and value, sorted by name
    token, url = "12345", "https://mycompany.com/myapp.php?foo=1&bar=2"
    params = {
        "CallSid": "CA1234567890ABCDE",
        "Caller": "+12349013030",
        "Digits": "1234",
        "From": "+12349013030",
        "To": "+18005551212",
    }
    assert twilio.signature(token, url, params) == "0/KCTR6DLpKmkAf8muzZqo1nDgQ="
    assert twilio.signature_ok(token, url, params, "0/KCTR6DLpKmkAf8muzZqo1nDgQ=")
    assert not twilio.signature_ok(token, url, {**params, "To": "+1"}, "0/KCTR6DLpKmkAf8muzZqo1nDgQ=")
    assert not twilio.signature_ok(token, url, params, None)
