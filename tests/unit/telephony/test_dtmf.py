import pytest
from hypothesis import given
from hypothesis import strategies as st

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


def feed_all(rx: DtmfReceiver, timestamp: int, payloads: list[bytes]) -> list[str]:
    return [d for payload in payloads for d in rx.feed(timestamp, payload)]


def test_rfc4733_event_fields_are_read() -> None:
    # event 11 (#), end bit, reserved bit set (ignored), volume 10, duration 1280 samples
    event = parse_event(bytes([11, 0x80 | 0x40 | 10]) + (1280).to_bytes(2, "big"))
    assert (event.digit, event.end, event.volume, event.duration) == ("#", True, 10, 1280)
    assert [parse_event(bytes([n, 0, 0, 0])).digit for n in range(16)] == list("0123456789*#ABCD")
    with pytest.raises(InvalidDtmf):
        parse_event(bytes([16, 0x80, 0, 160]))  # 16 is a flash, not a digit


def test_a_key_press_is_updates_then_three_identical_end_packets() -> None:
    payloads = event_payloads("a", duration_ms=100, step_ms=20, volume=7)
    events = [parse_event(p) for p in payloads]
    assert [e.digit for e in events] == ["A"] * 7  # 4 updates (20..80 ms) + 3 ends; lower case taken
    assert [e.end for e in events] == [False] * 4 + [True] * 3
    assert [e.duration for e in events] == [160, 320, 480, 640, 800, 800, 800]
    assert {e.volume for e in events} == {7}
    assert payloads[-1] == payloads[-2] == payloads[-3]


@pytest.mark.parametrize("digit", ["", "12", "E", " ", "é"])
def test_what_is_no_key_cannot_be_sent(digit: str) -> None:
    with pytest.raises(InvalidDtmf):
        event_payloads(digit)


def test_the_same_key_pressed_twice_is_two_digits() -> None:
    rx = DtmfReceiver()
    assert feed_all(rx, 1000, event_payloads("3")) + feed_all(rx, 3000, event_payloads("3")) == ["3", "3"]


def test_a_press_heard_only_by_its_end_packets_is_reported() -> None:
    rx = DtmfReceiver()
    assert feed_all(rx, 1000, event_payloads("0")[-3:]) == ["0"]


def test_a_late_end_packet_of_the_last_press_reports_nothing_twice() -> None:
    # the third end packet of "1" was delayed past the start of "2" (networks reorder)
    rx = DtmfReceiver()
    one, two = event_payloads("1"), event_payloads("2")
    assert feed_all(rx, 1000, one[:-1]) == ["1"]
    assert rx.feed(2000, two[0]) == []
    assert rx.feed(1000, one[-1]) == []  # nothing: "1" was reported, "2" is still being pressed
    assert feed_all(rx, 2000, two[1:]) == ["2"]


def test_a_press_reported_for_lost_end_packets_is_not_reported_again_when_they_come_late() -> None:
    rx = DtmfReceiver()
    seven, one = event_payloads("7"), event_payloads("1")
    assert rx.feed(1000, seven[0]) == []
    assert rx.feed(2000, one[0]) == ["7"]  # its end packets lost: reported as the next began
    assert feed_all(rx, 1000, seven[-3:]) == []  # they arrive after all
    assert feed_all(rx, 2000, one[1:]) == ["1"]


def test_a_packet_that_is_no_digit_changes_nothing() -> None:
    rx = DtmfReceiver()
    assert rx.feed(1000, event_payloads("4")[0]) == []
    with pytest.raises(InvalidDtmf):
        rx.feed(2000, bytes([200, 0x80, 0, 160]))
    assert feed_all(rx, 1000, event_payloads("4")[-3:]) == ["4"]


@given(
    st.lists(st.sampled_from(list("0123456789*#ABCD")), min_size=1, max_size=8),
    st.data(),
)
def test_every_press_is_reported_once_whatever_is_lost_or_repeated(presses: list[str], data) -> None:  # type: ignore[no-untyped-def]
    rx = DtmfReceiver()
    heard: list[str] = []
    last_ended = True
    for n, digit in enumerate(presses):
        payloads = event_payloads(digit)
        kept = [p for p in payloads if data.draw(st.booleans())] or [payloads[0]]
        for p in kept:
            for _ in range(data.draw(st.integers(1, 2))):  # some packets come twice
                heard += rx.feed(1000 + 1280 * n, p)
        last_ended = any(parse_event(p).end for p in kept)
    # the last press is reported once its end comes (or the next press begins): never twice
    assert heard == (presses if last_ended else presses[:-1])
