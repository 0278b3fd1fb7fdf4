"""Time sources and identifiers: elapsed milliseconds on an injected clock, ids and session ids."""

from __future__ import annotations

import re

import pytest

from omnivox.core import clock
from omnivox.core.errors import InvalidSessionId
from omnivox.core.ids import check_session_id, new_id


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# ---- clock


def test_elapsed_ms_reads_the_given_clock_in_milliseconds():
    assert clock.elapsed_ms(10.0, Clock(10.25)) == 250.0
    assert clock.elapsed_ms(10.0, Clock(10.0)) == 0.0


def test_elapsed_ms_is_rounded_to_microseconds():
    assert clock.elapsed_ms(0.0, Clock(0.0012345678)) == 1.235
    assert clock.elapsed_ms(0.0, Clock(1 / 3)) == 333.333


def test_elapsed_ms_of_a_clock_behind_the_start_is_negative():
    # the helper does not clamp: a start taken on another clock shows as such
    assert clock.elapsed_ms(5.0, Clock(4.5)) == -500.0


def test_the_default_clocks_are_the_standard_ones():
    import time

    assert clock.monotonic is time.monotonic and clock.wall is time.time
    start = clock.monotonic()
    assert clock.elapsed_ms(start) >= 0.0


# ---- ids


def test_new_id_is_the_prefix_and_sixteen_hex_digits():
    made = new_id("w")
    assert re.fullmatch(r"w_[0-9a-f]{16}", made)
    assert re.fullmatch(r"ref_[0-9a-f]{16}", new_id("ref"))


def test_new_ids_do_not_repeat():
    made = {new_id("t") for _ in range(500)}
    assert len(made) == 500


def test_new_id_keeps_any_prefix_as_given():
    assert new_id("").startswith("_") and len(new_id("")) == 17
    assert new_id("item").startswith("item_")


@pytest.mark.parametrize(
    "session_id",
    [
        "a",
        "Z",
        "0",
        "abc-123",
        "user.session:42",
        "a_b_c",
        "9.9.9",
        "a" * 128,
        "A" + "-_.:" * 31 + "xyz",
    ],
)
def test_safe_session_ids_are_returned_as_they_are(session_id):
    assert check_session_id(session_id) == session_id


@pytest.mark.parametrize(
    "session_id",
    [
        "",
        "-leading-dash",
        "_leading",
        ".hidden",
        ":colon",
        "a" * 129,
        "has space",
        "slash/inside",
        "back\\slash",
        "semi;colon",
        "tab\tin",
        "new\nline",
        "caf\u00e9",
        "a?b=c",
        "%2e%2e",
        "a#frag",
    ],
)
def test_unsafe_session_ids_are_refused(session_id):
    with pytest.raises(InvalidSessionId) as caught:
        check_session_id(session_id)
    err = caught.value
    assert err.code == "invalid_session_id" and err.http_status == 400 and err.close_code == 1008
    assert "1 to 128 characters" in err.message


def test_single_dots_are_allowed_but_never_two_in_a_row():
    assert check_session_id("a.b.c") == "a.b.c"
    for session_id in ("..", "a..b", "a...", "v1..2"):  # no recording may be named so: refused
        with pytest.raises(InvalidSessionId):
            check_session_id(session_id)


def test_the_length_limit_is_exactly_128():
    check_session_id("x" * 128)
    with pytest.raises(InvalidSessionId):
        check_session_id("x" * 129)
