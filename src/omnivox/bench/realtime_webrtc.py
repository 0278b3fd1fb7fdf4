"""``bench realtime --transport webrtc``: the same callers as over the WebSocket, calling over WebRTC.

Each caller is an aiortc peer (``bench.webrtc_client``): its microphone is an Opus track that plays
the turn's clip in real time (silence otherwise), the reply comes back on the call's track, the
events on the data channel. Voice-to-voice is timed from the moment the last speech sample left the
microphone to ``output_audio_buffer.started`` (the call's track begins to play the reply: "v2v")
and to the first reply audio that is not silence arriving on the track ("heard": it holds the TTS's
quiet before the first word, Opus and the caller's jitter buffer).
A turn is over once the call says ``output_audio_buffer.stopped`` (or the reply was cut).

Calls gather ICE candidates on 127.0.0.1 only, and the cluster is told to do the same.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from omnivox.bench.paced_caller import PAUSE_S
from omnivox.bench.webrtc_client import WebRtcCall, loopback_only

RATE = 24000
LOOPBACK_ENV = {"OMNIVOX_WEBRTC_HOST_ADDRESSES": '["127.0.0.1"]'}


class WebRtcCaller:
    def __init__(
        self,
        base_url: str,
        clips: list[tuple[np.ndarray, float]],
        session: dict[str, Any],
        stats: Any,
        pause_s: float = PAUSE_S,
    ) -> None:
        self.base_url = base_url
        self.clips = clips
        self.session = session  # the session the call asks for
        self.stats = stats  # bench.realtime.RealtimeCallerStats: v2v_s, heard_s, errors
        self.pause_s = pause_s  # before the next sentence once a reply has played out

    async def run(self, turns: int, offset_s: float) -> Any:
        await asyncio.sleep(offset_s)
        loopback_only()
        try:
            call = await WebRtcCall.open(self.base_url, None, session=self.session)
        except Exception as exc:  # refused, or ICE/DTLS never came up: one error for this caller
            self.stats.errors.append(f"connection: {type(exc).__name__}")
            return self.stats
        try:
            await call.wait_for("session.updated")
            for turn in range(turns):
                await self._turn(call, *self.clips[turn % len(self.clips)])
        except TimeoutError:
            self.stats.errors.append("timeout: no reply within 20 s")
        finally:
            await call.close()
        return self.stats

    async def _turn(self, call: WebRtcCall, clip: np.ndarray, speech_end_s: float) -> None:
        responses = len(call.of("response.done"))
        call.mic.clip_ended.clear()
        call.mic.play(clip)
        await call.mic.clip_ended.wait()  # the clip played into the call
        # the end marker is passed one frame after the clip's last frame left
        speech_end = call.mic.clip_ends[-1] - 0.02 - (len(clip) / RATE - speech_end_s)
        started = len(call.of("output_audio_buffer.started"))
        done = await call.wait_for("response.done", count=responses + 1)
        rid = done["response"]["id"]
        if done["response"]["status"] != "completed":
            self.stats.errors.append(f"response {done['response']['status']}")
        else:
            await call.wait_for("output_audio_buffer.stopped", response_id=rid)
        if len(call.of("output_audio_buffer.started")) > started:
            self.stats.v2v_s.append(call.times("output_audio_buffer.started")[started] - speech_end)
        heard = [t for t in call.loud_at if t > speech_end]
        if heard:
            self.stats.heard_s.append(heard[0] - speech_end)
        await asyncio.sleep(self.pause_s)  # the caller's pause before the next sentence
