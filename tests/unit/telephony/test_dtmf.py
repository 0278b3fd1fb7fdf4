import pytest

from omnivox.telephony.dtmf import DtmfReceiver, InvalidDtmf, event_payloads, parse_event


def test_a_key_press_is_reported_once():
    rx = DtmfReceiver()
    digits = [d for payload in event_payloads("5") for d in rx.feed(1000, payload)]
    assert digits == ["5"]
    assert [d for payload in event_payloads("#") for d in rx.feed(2000, payload)] == ["#"]


def test_a_press_whose_end_packets_were_lost_is_reported_when_the_next_begins():
    rx = DtmfReceiver()
    start = event_payloads("7")[0]
    assert rx.feed(1000, start) == []
    assert rx.feed(2000, event_payloads("1")[0]) == ["7"]


def test_bad_events_are_refused():
    with pytest.raises(InvalidDtmf):
        parse_event(b"\x01")
    with pytest.raises(InvalidDtmf):
        parse_event(bytes([200, 0x80, 0, 1]))
    with pytest.raises(InvalidDtmf):
        event_payloads("x")
    assert parse_event(event_payloads("9")[-1]).end
