from omnivox.telephony.playout import FRAME_BYTES, MarkedPlayout, OnPlayback, PacedPlayout


def test_paced_playout_reports_and_counts_what_was_taken():
    said: list[tuple[str, str]] = []
    p = PacedPlayout(lambda kind, rid: said.append((kind, rid)))
    p.push("r1", b"\x01" * (FRAME_BYTES * 2))
    p.audio_over("r1")
    assert p.take() == b"\x01" * FRAME_BYTES and said == [("started", "r1")]
    p.pause()
    assert p.take() == b"\xff" * FRAME_BYTES  # held: silence, nothing counted
    p.resume()
    p.take()
    assert said[-1] == ("stopped", "r1") and p.heard_ms("r1") == 40


def test_paced_playout_clear_drops_the_rest_and_later_audio_of_the_cut_reply():
    p = PacedPlayout(lambda kind, rid: None)
    p.push("r1", b"\x01" * FRAME_BYTES * 5)
    p.take()
    assert p.clear("r1") == "r1" and p.buffered == 0
    p.push("r1", b"\x01" * FRAME_BYTES)  # a late delta of the cut reply
    assert p.take() == b"\xff" * FRAME_BYTES and p.heard_ms("r1") == 20


def test_marked_playout_counts_only_echoed_markers():
    sent: list[tuple[str, object]] = []
    said: list[tuple[str, str]] = []
    p = MarkedPlayout(lambda kind, rid: said.append((kind, rid)), lambda a, d: sent.append((a, d)))
    p.push("r1", b"\x01" * 800)
    p.push("r1", b"\x02" * 800)
    p.audio_over("r1")
    start, *marks = [d for a, d in sent if a == "mark"]
    assert [a for a, _ in sent] == ["mark", "media", "mark", "media", "mark"] and said == [("queued", "r1")]
    p.marked(start)  # the carrier reached the reply's first audio
    assert said[1:] == [("started", "r1")] and p.heard_ms("r1") == 0
    p.marked(marks[0])
    assert p.heard_ms("r1") == 100
    p.marked(marks[1])
    assert p.heard_ms("r1") == 200 and said[-1] == ("stopped", "r1")


def test_a_pause_clears_the_carrier_and_resume_sends_the_unheard_audio_again():
    sent: list[tuple[str, object]] = []
    p = MarkedPlayout(lambda kind, rid: None, lambda a, d: sent.append((a, d)))
    p.push("r1", b"\x01" * 800)
    p.push("r1", b"\x02" * 800)
    _, first, second = [d for a, d in sent if a == "mark"]
    p.marked(first)
    p.pause()
    assert sent[-1] == ("clear", None)
    p.marked(second)  # the clear's echo of a dropped marker: not heard
    assert p.heard_ms("r1") == 100
    sent.clear()
    p.resume()
    assert [(a, d) for a, d in sent if a == "media"] == [("media", b"\x02" * 800)]
    p.marked(next(d for a, d in sent if a == "mark"))
    assert p.heard_ms("r1") == 200


def recorder() -> tuple[list[tuple[str, str]], OnPlayback]:
    said: list[tuple[str, str]] = []
    return said, lambda kind, rid: said.append((kind, rid))


def test_a_partial_frame_is_filled_with_the_codecs_silence() -> None:
    _, on = recorder()
    p = PacedPlayout(on, encoding="audio/pcma")
    p.push("r1", b"\x01" * 100)
    assert p.take() == b"\x01" * 100 + b"\xd5" * (FRAME_BYTES - 100)
    assert p.heard_ms("r1") == 12.5 and p.buffered == 0
    assert p.take() == b"\xd5" * FRAME_BYTES  # nothing left: A-law silence, not mu-law's


def test_replies_back_to_back_stop_one_and_start_the_next_in_one_frame() -> None:
    said, on = recorder()
    p = PacedPlayout(on)
    p.push("r1", b"\x01" * 60)
    p.audio_over("r1")
    p.push("r2", b"\x02" * 200)
    assert p.take() == b"\x01" * 60 + b"\x02" * 100
    assert said == [("started", "r1"), ("stopped", "r1"), ("started", "r2")]
    assert (p.heard_ms("r1"), p.heard_ms("r2")) == (7.5, 12.5) and p.buffered == 100


def test_a_reply_over_before_it_played_stops_once_it_has() -> None:
    said, on = recorder()
    p = PacedPlayout(on)
    p.push("r1", b"\x01" * FRAME_BYTES)
    p.audio_over("r1")
    assert said == []  # nothing played yet
    p.take()
    assert said == [("started", "r1"), ("stopped", "r1")]
    p.audio_over("r1")  # told twice: nothing more
    p.take()
    assert said == [("started", "r1"), ("stopped", "r1")]


def test_audio_over_after_the_last_frame_was_taken_stops_at_once() -> None:
    said, on = recorder()
    p = PacedPlayout(on)
    p.push("r1", b"\x01" * FRAME_BYTES)
    p.take()
    assert said == [("started", "r1")]
    p.audio_over("r1")
    assert said == [("started", "r1"), ("stopped", "r1")]


def test_empty_audio_and_unknown_replies_change_nothing() -> None:
    said, on = recorder()
    p = PacedPlayout(on)
    p.push("r1", b"")
    p.audio_over("nobody")
    assert p.take() == b"\xff" * FRAME_BYTES and said == [] and p.heard_ms("r1") == 0
    assert p.clear() is None  # nothing was playing


def test_clearing_a_reply_not_yet_playing_cuts_its_later_audio_too() -> None:
    said, on = recorder()
    p = PacedPlayout(on)
    p.push("r1", b"\x01" * FRAME_BYTES)
    p.take()
    assert p.clear("r2") == "r1"  # the one playing is cut as well as the one named
    p.push("r1", b"\x01" * FRAME_BYTES)
    p.push("r2", b"\x02" * FRAME_BYTES)
    p.push("r3", b"\x03" * FRAME_BYTES)
    assert p.take() == b"\x03" * FRAME_BYTES and p.heard_ms("r2") == 0
    assert said == [("started", "r1"), ("started", "r3")]  # a cut reply is not reported as played out


def test_a_pause_holds_the_reply_where_it_was_and_clear_ends_the_pause() -> None:
    _, on = recorder()
    p = PacedPlayout(on)
    p.push("r1", bytes(range(FRAME_BYTES)) * 2)
    p.take()
    p.pause()
    assert p.take() == b"\xff" * FRAME_BYTES and p.buffered == FRAME_BYTES
    p.resume()
    assert p.take() == bytes(range(FRAME_BYTES))  # the next sample, not one skipped
    p.push("r2", b"\x02" * FRAME_BYTES)
    p.pause()
    p.clear()
    assert not p.paused and p.take() == b"\xff" * FRAME_BYTES


def played(said: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The reports of playing (``queued``, the carrier having the audio, left out)."""
    return [s for s in said if s[0] != "queued"]


def marked() -> tuple[MarkedPlayout, list[tuple[str, object]], list[tuple[str, str]]]:
    sent: list[tuple[str, object]] = []
    said, on = recorder()
    return MarkedPlayout(on, lambda action, data: sent.append((action, data))), sent, said


def test_a_foreign_or_repeated_marker_counts_nothing() -> None:
    p, sent, _ = marked()
    p.push("r1", b"\x01" * 800)
    name = sent[-1][1]
    p.marked("someone-elses")
    assert p.heard_ms("r1") == 0
    p.marked(str(name))
    p.marked(str(name))  # echoed twice
    assert p.heard_ms("r1") == 100 and p.buffered == 0


def test_a_later_marker_counts_the_chunks_before_it() -> None:
    p, sent, _ = marked()
    for n in range(3):
        p.push("r1", bytes([n]) * 80)
    _, *marks = [d for a, d in sent if a == "mark"]
    p.marked(str(marks[2]))  # the carrier's echoes of the start and the first two were lost
    assert p.heard_ms("r1") == 30 and p.buffered == 0
    p.marked(str(marks[0]))
    assert p.heard_ms("r1") == 30


def test_audio_pushed_while_paused_waits_for_resume() -> None:
    p, sent, said = marked()
    p.pause()
    assert sent == []  # nothing pending: no clear sent
    p.push("r1", b"\x01" * 80)
    assert sent == [] and p.buffered == 80 and said == []
    p.resume()
    assert [a for a, _ in sent] == ["mark", "media", "mark"] and said == [("queued", "r1")]
    p.marked(str(sent[0][1]))
    assert said[1:] == [("started", "r1")]


def test_clear_drops_everything_and_its_echoes_mean_nothing() -> None:
    p, sent, said = marked()
    p.push("r1", b"\x01" * 80)
    p.push("r1", b"\x01" * 80)
    marks = [d for a, d in sent if a == "mark"]
    assert p.clear() == "r1" and sent[-1] == ("clear", None) and p.buffered == 0
    for name in marks:
        p.marked(str(name))
    assert p.heard_ms("r1") == 0
    p.push("r1", b"\x01" * 80)  # the cut reply's late audio is not sent
    assert sent[-1] == ("clear", None) and said == [("queued", "r1")]  # never started: never played
    sent.clear()
    assert p.clear() is None and sent == []  # nothing pending: no clear to send


def test_a_reply_with_nothing_pending_stops_when_over() -> None:
    p, sent, said = marked()
    p.push("r1", b"\x01" * 80)
    p.marked(str(sent[-1][1]))
    assert played(said) == [("started", "r1")]
    p.audio_over("r1")
    assert played(said) == [("started", "r1"), ("stopped", "r1")]


def test_markers_a_carrier_never_echoes_after_a_clear_leave_the_next_reply_counted_right() -> None:
    # Plivo echoes no checkpoint it dropped; Twilio echoes them all: either way only heard audio counts
    p, sent, _ = marked()
    for n in range(50):  # a long call, barged in on again and again
        p.push(f"r{n}", b"\x01" * 80)
        p.clear(f"r{n}")
    p.push("last", b"\x02" * 160)
    p.marked(str(sent[-1][1]))
    assert p.heard_ms("last") == 20 and p.buffered == 0
    assert all(p.heard_ms(f"r{n}") == 0 for n in range(50))


def test_started_is_when_the_carrier_reaches_the_reply_not_when_it_was_sent() -> None:
    # a carrier with a reply buffered: the next reply starts when the first has played out
    p, sent, said = marked()
    p.push("r1", b"\x01" * 800)
    p.audio_over("r1")
    p.push("r2", b"\x02" * 800)
    r1_start, r1_end, r2_start, r2_end = [d for a, d in sent if a == "mark"]
    assert played(said) == []
    p.marked(str(r1_start))
    assert played(said) == [("started", "r1")]
    p.marked(str(r1_end))
    assert played(said) == [("started", "r1"), ("stopped", "r1")]
    p.marked(str(r2_start))
    assert played(said)[-1] == ("started", "r2") and p.heard_ms("r2") == 0
    p.marked(str(r2_end))
    assert p.heard_ms("r2") == 100 and played(said).count(("started", "r2")) == 1


def test_a_lost_start_echo_starts_the_reply_at_its_first_heard_audio() -> None:
    p, sent, said = marked()
    p.push("r1", b"\x01" * 80)
    p.marked(str(sent[-1][1]))  # the start marker's echo never came
    assert played(said) == [("started", "r1")] and p.heard_ms("r1") == 10


def test_a_start_marker_echoed_by_a_clear_means_nothing_and_resume_sends_another() -> None:
    p, sent, said = marked()
    p.push("r1", b"\x01" * 80)
    start = sent[0][1]
    p.pause()  # speech over the reply before the carrier reached it
    p.marked(str(start))  # Twilio echoes the cleared marker
    assert played(said) == []
    sent.clear()
    p.resume()
    assert [a for a, _ in sent] == ["mark", "media", "mark"] and sent[0][1] != start
    p.marked(str(sent[0][1]))
    assert played(said) == [("started", "r1")]
    # a reply already playing when paused gets no second start on resume
    p.pause()
    sent.clear()
    p.resume()
    assert [a for a, _ in sent] == ["media", "mark"]


def test_a_reply_is_reported_queued_once_when_its_first_audio_goes_to_the_carrier() -> None:
    p, _, said = marked()
    p.push("r1", b"\x01" * 80)
    p.push("r1", b"\x01" * 80)
    assert said == [("queued", "r1")]
    p.pause()
    p.resume()  # sent again with a new start marker: queued already
    assert said == [("queued", "r1")]
