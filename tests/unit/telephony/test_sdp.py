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


def offer(media: str = "m=audio 4000 RTP/AVP 0 8 101", *extra: str, session: str = "") -> str:
    lines = ["v=0", "o=- 1 1 IN IP4 10.0.0.1", "s=-", "c=IN IP4 10.0.0.1", "t=0 0"]
    lines += [session] if session else []
    lines += [media, *extra]
    return "\r\n".join(lines) + "\r\n"


@pytest.mark.parametrize(
    ("m_line", "extra", "chosen"),
    [
        ("m=audio 4000 RTP/AVP 0 8", [], ("PCMU", 0)),  # static types need no rtpmap
        ("m=audio 4000 RTP/AVP 8 0", [], ("PCMA", 8)),  # the offerer's order is its preference
        ("m=audio 4000 RTP/AVP 96 0", ["a=rtpmap:96 PCMA/8000"], ("PCMA", 96)),  # a dynamic type
        ("m=audio 4000 RTP/AVP 96 0", ["a=rtpmap:96 pcmu/8000"], ("PCMU", 96)),  # names in any case
        ("m=audio 4000 RTP/AVP 97 8", ["a=rtpmap:97 PCMU/16000"], ("PCMA", 8)),  # not 8 kHz: passed over
        ("m=audio 4000 RTP/AVP 9 18 0", ["a=rtpmap:18 G729/8000"], ("PCMU", 0)),
    ],
)
def test_the_answer_takes_the_offerers_first_g711_codec(
    m_line: str, extra: list[str], chosen: tuple[str, int]
) -> None:
    plan, answer = sdp.answer(offer(m_line, *extra), "127.0.0.1", 30000)
    assert (plan.codec, plan.payload_type) == chosen
    assert f"m=audio 30000 RTP/AVP {chosen[1]}\r\n" in answer  # one codec answered, no events offered
    assert f"a=rtpmap:{chosen[1]} {chosen[0]}/8000" in answer


def test_the_answer_is_complete_sdp_with_ptime_and_the_peers_event_type() -> None:
    plan, answer = sdp.answer(
        offer("m=audio 4000 RTP/AVP 0 100", "a=rtpmap:100 telephone-event/8000", "a=fmtp:100 0-15"),
        "192.0.2.7",
        30000,
    )
    assert plan.dtmf_payload_type == 100  # the peer's number for events, not ours (101)
    lines = answer.split("\r\n")
    assert answer.endswith("\r\n") and lines[0] == "v=0"
    assert [line[:2] for line in lines[:5]] == ["v=", "o=", "s=", "c=", "t="]
    assert "c=IN IP4 192.0.2.7" in lines and "m=audio 30000 RTP/AVP 0 100" in lines
    assert {"a=rtpmap:100 telephone-event/8000", "a=fmtp:100 0-16", "a=ptime:20", "a=sendrecv"} <= set(lines)


@pytest.mark.parametrize(
    "extra",
    [
        ["a=rtpmap:101 telephone-event/16000"],  # events at another rate
        ["a=rtpmap:102 telephone-event/8000"],  # a type the m= line does not list
        [],
    ],
)
def test_events_are_only_taken_as_offered_at_8khz(extra: list[str]) -> None:
    plan, answer = sdp.answer(offer("m=audio 4000 RTP/AVP 0 101", *extra), "127.0.0.1", 30000)
    assert plan.dtmf_payload_type is None and "telephone-event" not in answer


@pytest.mark.parametrize(
    ("media_attr", "session_attr", "peer", "ours"),
    [
        ("a=sendrecv", "", "sendrecv", "sendrecv"),
        ("a=sendonly", "", "sendonly", "recvonly"),  # the caller put us on hold
        ("a=recvonly", "", "recvonly", "sendonly"),
        ("a=inactive", "", "inactive", "inactive"),
        ("", "a=sendonly", "sendonly", "recvonly"),  # said once for the whole session
        ("", "a=inactive", "inactive", "inactive"),
        ("a=sendrecv", "a=inactive", "sendrecv", "sendrecv"),  # the stream's own wins
        ("", "", "sendrecv", "sendrecv"),
    ],
)
def test_the_answers_direction_mirrors_the_offers(
    media_attr: str, session_attr: str, peer: str, ours: str
) -> None:
    extra = [media_attr] if media_attr else []
    plan, answer = sdp.answer(offer("m=audio 4000 RTP/AVP 0", *extra, session=session_attr), "127.0.0.1", 1)
    assert plan.direction == peer
    assert answer.endswith(f"a={ours}\r\n")


def test_a_streams_own_address_wins_and_ipv6_is_answered_in_ipv6() -> None:
    text = offer("m=audio 4000 RTP/AVP 0", "c=IN IP4 10.9.9.9")
    assert sdp.answer(text, "127.0.0.1", 1)[0].remote == ("10.9.9.9", 4000)
    v6 = text.replace("IN IP4 10.0.0.1", "IN IP6 2001:db8::1").replace("c=IN IP4 10.9.9.9\r\n", "")
    plan, answer = sdp.answer(v6, "::1", 30000)
    assert plan.remote == ("2001:db8::1", 4000)
    assert "c=IN IP6 ::1" in answer and "o=omnivox" in answer and " IN IP6 ::1\r\n" in answer


def test_bare_line_feeds_and_non_ascii_names_are_read() -> None:
    text = offer().replace("s=-", "s=Café ☎ 電話").replace("\r\n", "\n")
    assert sdp.answer(text, "127.0.0.1", 30000)[0].codec == "PCMU"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "m=audio 4000 RTP/AVP 0\r\n",  # no v= line first
        "v=1\r\n",
        offer("m=video 4000 RTP/AVP 96", "a=rtpmap:96 H264/90000"),  # no audio at all
        offer("m=audio 4000 UDP/TLS/RTP/SAVPF 0"),  # WebRTC's transport
        offer("m=audio 4000 RTP/SAVP 0"),  # SRTP
        offer("m=audio 70000 RTP/AVP 0"),
        offer("m=audio 0 RTP/AVP 0"),
        offer("m=audio 4000 RTP/AVP 9 18", "a=rtpmap:18 G729/8000"),
        offer("m=audio 4000 RTP/AVP 96", "a=rtpmap:96 opus/48000/2"),
        offer().replace("c=IN IP4 10.0.0.1", "c=IN IP4 999"),
        offer().replace("c=IN IP4 10.0.0.1", "c=IN IP4 10.0.0.256"),
        offer().replace("10.0.0.1", "ｓｉｐ.example"),
        offer() + "a=" + "é" * 8200 + "\r\n",  # under 16 KiB of characters, over 16 KiB of bytes
        offer() + "a=x\r\n" * 5000,
    ],
)
def test_offers_that_cannot_be_answered_are_refused_with_488(text: str) -> None:
    with pytest.raises(UnusableSdp) as err:
        sdp.answer(text, "127.0.0.1", 30000)
    assert (err.value.code, err.value.http_status) == ("unusable_sdp", 488)


def test_a_callees_answer_sets_the_plan() -> None:
    answer = offer("m=audio 5004 RTP/AVP 8 101", "a=rtpmap:101 telephone-event/8000", "a=recvonly")
    plan = sdp.accept_answer(answer)
    assert (plan.codec, plan.payload_type, plan.dtmf_payload_type) == ("PCMA", 8, 101)
    assert plan.remote == ("10.0.0.1", 5004) and plan.direction == "recvonly"
    for bad in (offer("m=audio 5004 RTP/AVP 9"), offer("m=audio 0 RTP/AVP 0"), "SIP/2.0 200 OK"):
        with pytest.raises(UnusableSdp):
            sdp.accept_answer(bad)


def test_our_offer_lists_both_g711_codecs_and_events() -> None:
    lines = sdp.offer("198.51.100.2", 31000).split("\r\n")
    assert "m=audio 31000 RTP/AVP 0 8 101" in lines and "c=IN IP4 198.51.100.2" in lines
    assert {"a=rtpmap:0 PCMU/8000", "a=rtpmap:8 PCMA/8000", "a=rtpmap:101 telephone-event/8000"} <= set(lines)


@pytest.mark.parametrize(
    ("attr", "peer", "ours"),
    [
        ("", "sendonly", "recvonly"),
        ("a=sendonly", "sendonly", "recvonly"),
        ("a=recvonly", "inactive", "inactive"),
    ],
)
def test_the_old_hold_by_address_0000_is_a_peer_that_takes_no_media(attr: str, peer: str, ours: str) -> None:
    held = offer("m=audio 4000 RTP/AVP 0", *([attr] if attr else [])).replace(
        "c=IN IP4 10.0.0.1", "c=IN IP4 0.0.0.0"
    )
    plan, answer = sdp.answer(held, "127.0.0.1", 1)
    assert plan.direction == peer and answer.endswith(f"a={ours}\r\n")


def test_a_preferred_codec_is_taken_only_where_the_offer_has_it() -> None:
    both = offer("m=audio 4000 RTP/AVP 8 0 101", "a=rtpmap:101 telephone-event/8000")
    plan, answer = sdp.answer(both, "127.0.0.1", 1, prefer="PCMU")
    assert (plan.codec, plan.payload_type) == ("PCMU", 0) and "m=audio 1 RTP/AVP 0 101" in answer
    assert sdp.answer(both, "127.0.0.1", 1, prefer=None)[0].codec == "PCMA"
    only_pcma = offer("m=audio 4000 RTP/AVP 8")
    assert sdp.answer(only_pcma, "127.0.0.1", 1, prefer="PCMU")[0].codec == "PCMA"  # never one not offered


@pytest.mark.parametrize(
    ("written", "canonical"),
    [("2001:DB8:0:0::1", "2001:db8::1"), ("2001:db8:0000::0001", "2001:db8::1"), ("10.0.0.1", "10.0.0.1")],
)
def test_the_peers_address_is_taken_in_the_form_its_packets_come_from(written: str, canonical: str) -> None:
    family = "IP6" if ":" in written else "IP4"
    text = offer().replace("c=IN IP4 10.0.0.1", f"c=IN {family} {written}")
    assert sdp.answer(text, "127.0.0.1", 1)[0].remote == (canonical, 4000)


def test_a_re_invite_s_answer_keeps_the_session_id_and_counts_the_version_up():
    first = sdp.Origin(1_800_000_000, 1_800_000_000)
    _, answer = sdp.answer(OFFER, "10.0.0.2", 4000, origin=first)
    _, again = sdp.answer(OFFER, "10.0.0.2", 4000, origin=first.next())
    origin_line = lambda text: next(line for line in text.splitlines() if line.startswith("o="))  # noqa: E731
    assert origin_line(answer) == "o=omnivox 1800000000 1800000000 IN IP4 10.0.0.2"
    assert origin_line(again) == "o=omnivox 1800000000 1800000001 IN IP4 10.0.0.2"
    assert first.next().next() == sdp.Origin(1_800_000_000, 1_800_000_002)
