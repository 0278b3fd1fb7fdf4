"""The call's outgoing track: real-time frames of reply audio, silence between, playback events."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.gateway.edges.call_audio import CHUNK_MS, FRAME_MS, WebRtcPlayout


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def frames(track: WebRtcPlayout, n: int, clock: Clock) -> list[np.ndarray]:
    out = []
    for _ in range(n):
        clock.now += 0.02  # never ahead of real time: recv does not wait
        out.append((await track.recv()).to_ndarray().reshape(-1))
    return out


async def test_reply_audio_plays_then_stops_and_a_clear_cuts_it() -> None:
    said: list[tuple[str, str]] = []
    clock = Clock()
    track = WebRtcPlayout(24000, lambda kind, rid: said.append((kind, rid)), clock=clock)
    pcm = (np.ones(480 * 3, "<i2") * 1000).tobytes()  # 60 ms
    track.push("r1", pcm)
    track.audio_over("r1")  # response.done came before the audio played
    played = await frames(track, 4, clock)
    assert [int(f.max()) for f in played] == [1000, 1000, 1000, 0]  # then silence
    assert said == [("started", "r1"), ("stopped", "r1")]
    assert track.played_ms == 60

    track.push("r2", pcm)
    await frames(track, 1, clock)
    assert track.clear() == "r2" and track.buffered == 0
    track.push("r2", pcm)  # late audio of a cut response is dropped
    assert [int(f.max()) for f in await frames(track, 2, clock)] == [0, 0]
    assert said[-1] == ("started", "r2") and ("stopped", "r2") not in said


# ---- the call's outgoing track (frames assembled without the real-time pacing)

RATE = 24000
FRAME = RATE * FRAME_MS // 1000  # samples per frame


def pcm(samples: int, value: int = 1000) -> bytes:
    return (np.full(samples, value, "<i2")).tobytes()


def track():
    said: list[tuple[str, str]] = []
    return WebRtcPlayout(RATE, lambda kind, rid: said.append((kind, rid)), clock=Clock(0.0)), said


def frame_values(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, "<i2")


def test_the_frame_sizes():
    t, _ = track()
    assert FRAME_MS == 20 and CHUNK_MS == 40
    assert t._frame_bytes == FRAME * 2
    assert WebRtcPlayout(16000, lambda k, r: None)._frame_bytes == 640


def test_an_empty_track_plays_silence_and_says_nothing():
    t, said = track()
    out = t._take()
    assert len(out) == FRAME * 2 and not frame_values(out).any()
    assert said == [] and t.played_ms == 0 and t.playing is None


def test_push_counts_what_is_buffered_and_ignores_empty_audio():
    t, _ = track()
    t.push("r", pcm(100))
    t.push("r", b"")
    assert t.buffered == 200 and len(t._chunks) == 1


def test_a_short_reply_is_padded_with_silence_and_stops_when_over():
    t, said = track()
    t.push("r", pcm(FRAME // 2, 7))
    t.audio_over("r")
    values = frame_values(t._take())
    assert (values[: FRAME // 2] == 7).all() and not values[FRAME // 2 :].any()
    assert said == [("started", "r"), ("stopped", "r")]
    assert t.played_ms == pytest.approx(FRAME_MS / 2)
    assert t.buffered == 0 and t.playing is None


def test_a_frame_spans_chunks():
    t, said = track()
    t.push("r", pcm(FRAME // 4, 1))
    t.push("r", pcm(FRAME, 2))
    values = frame_values(t._take())
    assert (values[: FRAME // 4] == 1).all() and (values[FRAME // 4 :] == 2).all()
    assert t.buffered == (FRAME // 4) * 2
    assert said == [("started", "r")]


def test_a_reply_without_audio_over_keeps_playing_through_silence():
    t, said = track()
    t.push("r", pcm(FRAME))
    t._take()
    t._take()
    assert t.playing == "r" and said == [("started", "r")]
    t.audio_over("r")  # nothing left buffered: it has stopped at once
    assert said == [("started", "r"), ("stopped", "r")] and t.playing is None


def test_audio_over_while_audio_is_left_waits_for_it():
    t, said = track()
    t.push("r", pcm(FRAME * 2))
    t._take()
    t.audio_over("r")
    assert said == [("started", "r")]
    t._take()
    assert said == [("started", "r"), ("stopped", "r")]


def test_audio_over_of_a_reply_not_playing_says_nothing_yet():
    t, said = track()
    t.audio_over("later")
    assert said == []
    t.push("later", pcm(FRAME))
    t._take()
    assert said == [("started", "later"), ("stopped", "later")]


def test_the_next_reply_stops_the_one_before():
    t, said = track()
    t.push("a", pcm(FRAME // 2))
    t.push("b", pcm(FRAME // 2))
    t._take()
    assert said == [("started", "a"), ("stopped", "a"), ("started", "b")]
    assert t.playing == "b"


def test_audio_of_no_response_plays_without_events():
    t, said = track()
    t.push(None, pcm(FRAME, 3))
    assert (frame_values(t._take()) == 3).all()
    assert said == [] and t.played_ms == FRAME_MS


def test_clear_of_nothing_playing_returns_none_but_cuts_the_named_reply():
    t, said = track()
    t.push("r", pcm(FRAME))
    assert t.clear("r") is None
    assert t.buffered == 0 and len(t._chunks) == 0
    t.push("r", pcm(FRAME))
    assert t.buffered == 0
    t.push("s", pcm(FRAME))
    assert t.buffered == FRAME * 2
    assert said == []


def test_clear_says_nothing_stopped():
    t, said = track()
    t.push("r", pcm(FRAME * 3))
    t._take()
    assert t.clear() == "r"
    assert said == [("started", "r")] and t.playing is None
    assert not frame_values(t._take()).any()


def test_played_ms_counts_reply_audio_only():
    t, _ = track()
    t.push("r", pcm(FRAME + FRAME // 2))
    for _ in range(4):
        t._take()
    assert t.played_ms == pytest.approx(FRAME_MS * 1.5)


def test_a_held_reply_plays_silence_keeps_its_audio_and_plays_on_when_resumed():
    t, said = track()
    t.push("r", pcm(FRAME * 3, 5))
    assert (frame_values(t._take()) == 5).all()
    t.pause()
    held = frame_values(t._take())
    assert not held.any() and t.buffered == FRAME * 2 * 2  # nothing of it was played, nor dropped
    assert t.playing == "r" and said == [("started", "r")]  # held, not stopped
    t.resume()
    assert (frame_values(t._take()) == 5).all() and t.buffered == FRAME * 2
    assert t.played_ms == pytest.approx(2 * FRAME_MS)


def test_a_cut_while_held_lets_the_next_reply_play():
    t, said = track()
    t.push("r1", pcm(FRAME * 2, 5))
    t._take()
    t.pause()
    assert t.clear("r1") == "r1"
    t.push("r2", pcm(FRAME, 9))
    assert (frame_values(t._take()) == 9).all()
    assert said == [("started", "r1"), ("started", "r2")]
