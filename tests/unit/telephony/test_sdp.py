import pytest
from hypothesis import given
from hypothesis import strategies as st

from omnivox.core.errors import UnusableSdp
from omnivox.telephony import sdp

OFFER = (
    "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nc=IN IP4 10.0.0.1\r\nt=0 0\r\n"
    "m=audio 4000 RTP/AVP 9 8 0 101\r\na=rtpmap:9 G722/8000\r\na=rtpmap:101 telephone-event/8000\r\n"
    "a=fmtp:101 0-15\r\na=sendrecv\r\n"
)


def test_the_answer_takes_the_first_g711_codec_and_telephone_events():
    plan, answer = sdp.answer(OFFER, "127.0.0.1", 30000)
    assert (plan.codec, plan.payload_type, plan.dtmf_payload_type) == ("PCMA", 8, 101)
    assert plan.remote == ("10.0.0.1", 4000) and plan.encoding == "audio/pcma"
    assert "m=audio 30000 RTP/AVP 8 101" in answer and "c=IN IP4 127.0.0.1" in answer


@pytest.mark.parametrize(
    "offer",
    [
        "hello",
        OFFER.replace("9 8 0 101", "9 101"),  # no G.711
        OFFER.replace("m=audio 4000", "m=audio 0"),  # disabled stream
        OFFER.replace("c=IN IP4 10.0.0.1\r\n", ""),  # no address
        OFFER.replace("c=IN IP4 10.0.0.1", "c=IN IP4 example.com"),
        OFFER.replace("RTP/AVP", "RTP/SAVP"),
        "v=0\r\n" + "a=x\r\n" * 5000,  # too large
    ],
)
def test_offers_omnivox_cannot_carry_are_refused(offer):
    with pytest.raises(UnusableSdp):
        sdp.answer(offer, "127.0.0.1", 30000)


@given(st.text(max_size=500))
def test_any_text_is_answered_or_refused_cleanly(text):
    try:
        sdp.answer("v=0\r\n" + text, "127.0.0.1", 30000)
    except UnusableSdp:
        pass


def test_our_offer_is_an_answerable_offer():
    plan = sdp.accept_answer(sdp.offer("127.0.0.1", 30002))
    assert plan.codec == "PCMU" and plan.remote == ("127.0.0.1", 30002) and plan.dtmf_payload_type == 101
