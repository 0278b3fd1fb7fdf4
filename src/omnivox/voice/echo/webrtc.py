"""WebRTC's acoustic echo canceller (AEC3), from the audio processing module in LiveKit's wheel.

Chosen on measurements (docs/benchmarks.md, "Own-echo guard"): on hibari replies played back with
30-150 ms of delay, a small room's reverberation and -6 to -20 dB of attenuation, AEC3 removed 20-34
dB of echo and left no echo that silero VAD took for speech (0 false barge-ins in 16 replies), kept
every barge-in spoken over the echo, found the echo up to about 450 ms after the reference, and cost
about 1% of a core. pyaec (a Rust port of SpeexDSP's canceller) removed 12-23 dB and let 5 of 16
replies through as speech; a partitioned-block NLMS filter in numpy removed 15-26 dB but its residual
still fooled the VAD (the VAD does not care how loud speech is) and its double-talk freeze lost user
speech over the echo.

The module processes 10 ms frames; the output lags the input by exactly one frame (10 ms, the
stream's length is kept). While the
reference has been silent for ``idle_ms`` the near end passes through untouched and the module is
not called (no cost between replies; its filter keeps what it learnt).
"""

from __future__ import annotations

import numpy as np

from omnivox.voice.echo.base import EchoCanceller

FRAME = 160  # 10 ms at 16 kHz
_SILENT = 1e-7  # mean square below this is no sound (about -70 dBFS)
_RESIDUE = 0.125  # a frame the canceller took 9 dB or more out of is echo
_ECHO_PATH = 4.0  # gating starts once the canceller removes 6 dB on average (there is an echo)


class WebRtcEchoCanceller(EchoCanceller):
    def __init__(self, idle_ms: float = 1000.0) -> None:
        from livekit import rtc

        self._rtc = rtc
        self._apm = rtc.AudioProcessingModule(echo_cancellation=True)
        self._near = np.zeros(0, np.float32)
        self._ref = np.zeros(0, np.float32)
        self._out = np.zeros(FRAME, np.float32)  # one frame of lag: always enough to return
        self._idle_frames = int(idle_ms / 10)
        self._quiet = self._idle_frames  # frames since the reference last had sound
        self.frames = 0  # frames that went through the module
        self._erle = 1.0  # running ratio of near-end to output energy

    def process(self, near: np.ndarray, reference: np.ndarray) -> np.ndarray:
        if len(near) != len(reference):
            raise ValueError("near and reference must be the same length")
        self._near = np.concatenate([self._near, near.astype(np.float32, copy=False)])
        self._ref = np.concatenate([self._ref, reference.astype(np.float32, copy=False)])
        n = len(self._near) // FRAME
        parts = [self._out]
        for i in range(n):
            parts.append(
                self._frame(self._near[i * FRAME : (i + 1) * FRAME], self._ref[i * FRAME : (i + 1) * FRAME])
            )
        self._near, self._ref = self._near[n * FRAME :], self._ref[n * FRAME :]
        out = np.concatenate(parts)
        self._out = out[len(near) :]
        return out[: len(near)]

    def _frame(self, near: np.ndarray, ref: np.ndarray) -> np.ndarray:
        self._quiet = 0 if float(np.mean(ref * ref)) > _SILENT else self._quiet + 1
        if self._quiet > self._idle_frames:
            return near
        rtc = self._rtc
        self._apm.process_reverse_stream(rtc.AudioFrame(_pcm(ref), 16000, 1, FRAME))
        frame = rtc.AudioFrame(_pcm(near), 16000, 1, FRAME)
        self._apm.set_stream_delay_ms(0)  # the reference is aligned to play time (it leads the echo)
        self._apm.process_stream(frame)
        self.frames += 1
        out = np.frombuffer(bytes(frame.data), np.int16).astype(np.float32) / 32768.0
        near_e, out_e = float(np.mean(near * near)), float(np.mean(out * out))
        if near_e > _SILENT:  # how much the canceller takes out over the last second or so
            self._erle = 0.97 * self._erle + 0.03 * min(near_e / max(out_e, 1e-12), 1000.0)
        # once there is an echo to take out, what is left of a frame the canceller took most of is
        # the echo's residue: the VAD hears speech at any level, so it is silenced (speech over the
        # echo keeps most of its energy; with no echo at all, e.g. headphones, nothing is gated)
        if self._erle > _ECHO_PATH and out_e < _RESIDUE * near_e:
            return np.zeros(FRAME, np.float32)
        return out

    def close(self) -> None:
        self._apm = None  # type: ignore[assignment]


def _pcm(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1.0, 1.0) * 32767).astype(np.int16).tobytes()
