"""The call's outgoing track: real-time frames of reply audio, silence between, playback events."""

from __future__ import annotations

import numpy as np

from omnivox.gateway.edges.call_audio import WebRtcPlayout


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

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
