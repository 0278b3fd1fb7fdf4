"""The playout ledger: the server's model of a reply's playback, the echo reference it gives the
canceller, what was heard of each reply, and which reply has the floor."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.agent.playout import REPORT_GRACE_S, EchoReference, Playback, PlayClock, Playout
from omnivox.audio.resample import StreamResampler


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_playback_runs_in_real_time_and_never_ahead_of_what_was_sent() -> None:
    clock = Clock()
    play = PlayClock(clock)
    assert play.played_ms() == 0 and play.play_at(0) is None  # not started
    play.start()
    play.sent(500)
    clock.now += 0.2
    assert play.played_ms() == pytest.approx(200) and play.ahead_ms() == pytest.approx(300)
    clock.now += 1.0
    assert play.played_ms() == 500  # it ran out of audio
    assert play.play_at(100) == pytest.approx(100.1)


def test_a_pause_freezes_it_and_a_resume_plays_on_from_there() -> None:
    clock = Clock()
    play = PlayClock(clock)
    play.start()
    play.sent(2000)
    clock.now += 0.5
    assert play.pause() == pytest.approx(500) and play.paused
    clock.now += 3.0
    assert play.played_ms() == pytest.approx(500) and play.play_at(800) is None  # not while paused
    assert play.resume() == pytest.approx(500)
    clock.now += 0.25
    assert play.played_ms() == pytest.approx(750)
    assert play.stop() == pytest.approx(750) and play.stopped and play.play_at(900) is None


def test_unsent_audio_is_taken_back() -> None:
    play = PlayClock(Clock())
    play.sent(1000)
    play.unsent(400)
    play.unsent(5000)
    assert play.sent_ms == 0


def test_the_reference_is_the_reply_audio_that_played_while_the_microphone_heard() -> None:
    clock = Clock()
    play = PlayClock(clock)
    ref = EchoReference()
    tone = np.sin(np.arange(16000) / 5).astype(np.float32)  # 1 s at 16 kHz
    play.start()
    play.sent(1000)
    ref.add(play, 0, tone, 16000)
    clock.now += 1.0
    # the microphone's last 0.5 s heard the second half of the reply
    heard = ref.take(arrival=clock.now, n=8000)
    lead = np.argmax(np.abs(heard) > 0)  # the resampler's delay aside, it lines up
    assert np.abs(heard[lead + 100 : lead + 7000] - tone[8000 + 100 : 15000]).max() < 0.05 or lead < 8000
    assert np.abs(heard).max() > 0.5
    # before the reply began: silence
    assert not ref.take(arrival=clock.now - 2.0, n=8000).any()


def test_a_stopped_reply_is_forgotten_once_its_echo_can_no_longer_come() -> None:
    clock = Clock()
    play = PlayClock(clock)
    ref = EchoReference()
    play.start()
    play.sent(1000)
    ref.add(play, 0, np.ones(16000, np.float32), 16000)
    clock.now += 0.1
    play.stop()
    clock.now += 1.0
    assert not ref.take(arrival=clock.now, n=1600).any()  # nothing played after the stop
    clock.now += 3.0  # kept a few seconds (a late echo of what did play), then forgotten
    ref.take(arrival=clock.now, n=1600)
    assert ref.held() == 0


class PieceByPieceReference:
    """The reference read piece by piece, each piece's ``play_at`` asked (what ``EchoReference`` did
    before it bisected a reply's pieces): what it must still give, sample for sample."""

    def __init__(self) -> None:
        self.pieces: list[tuple[PlayClock, float, np.ndarray]] = []
        self.resamplers: dict[PlayClock, tuple[StreamResampler, list[float]]] = {}

    def add(self, clock: PlayClock, offset_ms: float, audio: np.ndarray, rate: int) -> None:
        resampler, next_ms = self.resamplers.setdefault(clock, (StreamResampler(rate, 16000), [offset_ms]))
        out = resampler.process(audio)
        if len(out):
            self.pieces.append((clock, next_ms[0], out))
            next_ms[0] += len(out) * 1000 / 16000

    def take(self, arrival: float, n: int) -> np.ndarray:
        out = np.zeros(n, np.float32)
        start = arrival - n / 16000
        keep = []
        for clock, offset, audio in self.pieces:
            at = clock.play_at(offset)
            if at is None:
                if not clock.stopped:
                    keep.append((clock, offset, audio))
                continue
            lo = round((at - start) * 16000)
            a, b = max(lo, 0), min(lo + len(audio), n)
            if a < b:
                out[a:b] += audio[a - lo : b - lo]
            if at + len(audio) / 16000 >= arrival - 3.0:
                keep.append((clock, offset, audio))
        self.pieces = keep
        live = {clock for clock, _, _ in keep}
        self.resamplers = {c: r for c, r in self.resamplers.items() if c in live}
        return out


@pytest.mark.parametrize("seed", range(6))
def test_the_reference_gives_what_each_piece_played_through_pauses_stops_and_overlaps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    clock = Clock()
    ref, oracle = EchoReference(), PieceByPieceReference()
    playing: list[PlayClock] = []
    for _ in range(400):  # 40 ms microphone chunks; replies sent ahead in frames of any size
        clock.now += 0.04
        if not playing or rng.random() < 0.02:
            playing.append(PlayClock(clock))
        play = playing[-1]
        if not play.stopped and play.ahead_ms() < 300:
            samples = int(rng.integers(1, 2400))
            audio = rng.standard_normal(samples).astype(np.float32)
            play.start()
            ref.add(play, play.sent_ms, audio, 24000)
            oracle.add(play, play.sent_ms, audio, 24000)
            play.sent(samples / 24)
        event = rng.random()
        if event < 0.03:
            play.pause()
        elif event < 0.06:
            play.resume()
        elif event < 0.08:
            play.stop(None if rng.random() < 0.5 else float(rng.uniform(0, play.sent_ms)))
        elif event < 0.09:
            play.heard_started(clock.now + float(rng.uniform(-0.1, 0.3)))
        n = 640 if rng.random() < 0.9 else int(rng.integers(1, 8000))
        np.testing.assert_allclose(ref.take(clock.now, n), oracle.take(clock.now, n), atol=1e-6)
        assert ref.held() == len(oracle.pieces)


# ---- one reply's playback, and the session's ledger


def spoken(clock: Clock, *sentences: tuple[str, float]) -> Playback:
    """A reply that said each (text, seconds of audio) in turn, at 16 kHz."""
    playback = Playout(clock).playback()
    for text, seconds in sentences:
        playback.sentence(text)
        playback.send(np.zeros(int(16000 * seconds), np.float32), 16000)
    return playback


def test_a_playback_knows_its_sentences_and_the_words_heard_by_any_point() -> None:
    clock = Clock()
    playback = spoken(clock, ("Hello there.", 1.0), ("How are you doing today?", 2.0))
    assert playback.spans == ((0.0, "Hello there."), (1000.0, "How are you doing today?"))
    assert playback.text == "Hello there. How are you doing today?" and playback.audio_ms == 3000
    assert playback.heard_text(500) == "Hello"
    assert playback.heard_text(2000) == "Hello there. How are you"  # half of the second sentence
    assert playback.truncate(1200) == "Hello there. How"
    assert playback.audio_ms == 1200 and playback.sent_ms == 3000  # later cuts are bounded by it
    assert playback.text == "Hello there. How are you doing today?"  # both sentences began before


def test_the_ledger_says_what_is_left_to_play_and_what_was_just_heard() -> None:
    clock = Clock()
    playout = Playout(clock)
    assert playout.left_s() == 0 and playout.spoken_recently() == ""
    playback = playout.playback()
    for text in ("One.", "Two.", "Three."):
        playback.sentence(text)
        playback.send(np.zeros(16000 * 5, np.float32), 16000)  # five seconds each
    playout.hold(playback)
    clock.now += 12.0
    assert playout.left_s() == pytest.approx(3.0)
    # the last 8 s of what played: the end of the first sentence, the second, the start of the third
    assert playout.spoken_recently() == "One. Two. Three."
    assert playout.spoken_recently(window_ms=1000) == "Three."
    other = playout.playback()
    playout.forget(other)  # not the one on the floor: nothing changes
    assert playout.current is playback
    playout.forget(playback)
    assert playout.left_s() == 0 and playout.spoken_recently() == ""


def test_the_ledger_gives_the_echo_of_what_its_replies_sent() -> None:
    clock = Clock()
    playout = Playout(clock)
    playback = playout.playback()
    playback.send(np.ones(16000, np.float32), 16000)
    clock.now += 1.0
    assert playout.echo(arrival=clock.now, n=1600).any()
    playback.stop()
    clock.now += 1.0
    assert not playout.echo(arrival=clock.now, n=1600).any()


# ---- the listener's own reports of its player (WebRTC track, carrier marks, client reports)


def sending(ms: float, waits_for_audio: bool = False) -> tuple[Clock, PlayClock]:
    """A play clock whose first ``ms`` of audio went out now."""
    clock = Clock()
    play = PlayClock(clock, waits_for_audio)
    play.start()
    play.sent(ms)
    return clock, play


def test_a_report_that_the_player_began_later_moves_playback_there_and_never_earlier() -> None:
    clock, play = sending(2000)  # the first audio is sent at 100.0
    clock.now += 0.1
    assert play.heard_started(100.4) == pytest.approx(400)  # a carrier's buffer: 400 ms later
    clock.now = 101.0
    assert play.played_ms() == pytest.approx(600)  # counted from 100.4, not 100.0
    assert play.play_at(0) == pytest.approx(100.4) and play.modelled_end() == pytest.approx(102.4)
    assert play.heard_started(100.2) == pytest.approx(-200)  # earlier than the model: nothing moves
    assert play.play_at(0) == pytest.approx(100.4)


def test_a_report_that_the_player_stopped_ends_playback_at_everything_sent() -> None:
    clock, play = sending(2000)
    clock.now += 1.5  # the model still has 500 ms to play
    assert play.heard_stopped() == pytest.approx(-500)
    assert play.stopped and play.played_ms() == 2000 and play.play_at(2500) is None
    assert play.play_at(1000) == pytest.approx(101.0)  # what played keeps its place (the echo's)


def on_the_floor(seconds: float) -> tuple[Clock, Playout, Playback]:
    """A ledger whose reply on the floor sent ``seconds`` of audio now."""
    clock = Clock()
    playout = Playout(clock)
    playback = playout.playback()
    playback.send(np.zeros(int(16000 * seconds), np.float32), 16000)
    playout.hold(playback)
    return clock, playout, playback


def test_without_reports_a_reply_plays_as_long_as_the_model_says() -> None:
    clock, playout, _ = on_the_floor(1.0)
    clock.now += 0.9
    assert playout.playing()
    clock.now += 0.2
    assert not playout.playing()


def test_with_reports_a_reply_plays_until_the_listener_says_it_stopped() -> None:
    clock, playout, playback = on_the_floor(1.0)
    playout.heard(playback, started=True, at=clock.now)  # the listener reports its player
    clock.now += 1.5  # past the model's end: the player ran dry, or buffers more than modelled
    assert playout.left_s() == 0 and playout.playing()
    assert playout.heard(playback, started=False, at=clock.now) == pytest.approx(500)  # 500 ms late
    assert not playout.playing()  # the caller's next words are a new turn


def test_a_listener_that_has_the_audio_queued_is_waited_for_before_its_first_report() -> None:
    # a carrier 2 s behind: the call's first reply (1 s) is over by the model before it starts
    clock, playout, playback = on_the_floor(1.0)
    playout.expect_reports()  # the carrier has the audio queued: its marks will say
    clock.now += 1.5
    assert playout.playing()
    clock.now += 0.5
    playout.heard(playback, started=True, at=clock.now)  # the carrier reached it, 2 s late
    clock.now += 0.9
    assert playout.playing() and playout.left_s() > 0  # its clock runs from the carrier's start
    playout.heard(playback, started=False, at=clock.now)
    assert not playout.playing()


def test_a_stop_report_ends_a_reply_the_model_still_had_playing() -> None:
    clock, playout, playback = on_the_floor(2.0)
    clock.now += 1.6
    assert playout.playing()
    playout.heard(playback, started=False, at=clock.now)  # the player is done (it played ahead)
    assert not playout.playing() and playout.left_s() == 0


def test_a_lost_stop_report_ends_the_reply_the_grace_after_the_model() -> None:
    clock, playout, first = on_the_floor(1.0)
    playout.heard(first, started=False, at=clock.now + 1.0)
    second = playout.playback()  # the listener reports: this one waits for its stop
    second.send(np.zeros(16000, np.float32), 16000)
    playout.hold(second)
    clock.now += 1.0 + REPORT_GRACE_S - 0.1
    assert playout.playing()
    clock.now += 0.2
    assert not playout.playing()


def test_a_player_that_runs_dry_plays_the_late_audio_from_when_it_came() -> None:
    clock, play = sending(1000, waits_for_audio=True)
    clock.now += 1.5  # the next sentence came 500 ms after the player ran out
    play.sent(1000)
    assert play.modelled_end() == pytest.approx(102.5)  # not 102.0: the player waited
    clock.now += 0.9
    assert play.played_ms() == pytest.approx(1900)


def test_the_ledger_says_how_long_ago_the_model_played_the_reply_out() -> None:
    clock, playout, playback = on_the_floor(1.0)
    assert playout.played_out_s() == 0.0  # it plays
    clock.now += 1.3
    assert playout.played_out_s() == pytest.approx(0.3)
    assert playout.played_out_s(at=clock.now - 0.5) == 0.0  # (audio that arrived while it played)
    playback.pause()
    assert playout.played_out_s() is None  # paused: it has not ended
    playback.resume()
    playback.stop()
    assert playout.played_out_s() is None  # cut: nothing of it plays, whatever the player's lag
    assert Playout(clock).played_out_s() is None  # no reply heard


def test_the_ledger_says_how_long_the_model_has_the_reply_play_on() -> None:
    clock, playout, playback = on_the_floor(1.0)
    assert playout.ends_in_s() == pytest.approx(1.0)
    clock.now += 0.8
    assert playout.ends_in_s() == pytest.approx(0.2)
    assert playout.ends_in_s(at=clock.now - 0.5) == pytest.approx(0.7)  # (audio that arrived earlier)
    clock.now += 0.5
    assert playout.ends_in_s() == 0.0  # played out
    playback.pause()
    assert playout.ends_in_s() is None  # paused: it does not end as things stand
    playback.resume()
    playout.expect_reports()
    assert playout.ends_in_s() is None  # the listener reports when it stops: no model
    assert Playout(clock).ends_in_s() is None  # no reply heard


def test_a_listener_that_reports_its_playback_gets_no_allowance_past_the_model() -> None:
    clock, playout, playback = on_the_floor(1.0)
    playout.heard(playback, started=True, at=clock.now)
    clock.now += 1.2
    assert playout.played_out_s() is None  # its reports say when it stopped, exactly
    playout.heard(playback, started=False, at=clock.now)
    assert playout.played_out_s() is None and not playout.playing()
