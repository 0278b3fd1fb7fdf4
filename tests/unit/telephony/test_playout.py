from omnivox.telephony.playout import FRAME_BYTES, MarkedPlayout, PacedPlayout


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
    marks = [d for a, d in sent if a == "mark"]
    assert [a for a, _ in sent] == ["media", "mark", "media", "mark"] and said == [("started", "r1")]
    p.marked(marks[0])
    assert p.heard_ms("r1") == 100
    p.marked(marks[1])
    assert p.heard_ms("r1") == 200 and said[-1] == ("stopped", "r1")


def test_a_pause_clears_the_carrier_and_resume_sends_the_unheard_audio_again():
    sent: list[tuple[str, object]] = []
    p = MarkedPlayout(lambda kind, rid: None, lambda a, d: sent.append((a, d)))
    p.push("r1", b"\x01" * 800)
    p.push("r1", b"\x02" * 800)
    first, second = [d for a, d in sent if a == "mark"]
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
