"""8 kHz -> 16 kHz for a live stream with 4 ms of delay: a half-band interpolator.

A telephone line's audio (G.711 at 8 kHz) is heard by models that take 16 kHz. soxr's streaming
resampler (``audio.resample.StreamResampler``) works in blocks: at 8 -> 16 kHz in 40 ms chunks its
HQ setting holds back 12-115 ms of output (64 ms at the median), LQ 4-61 ms, and every sample held
back is a sample the VAD hears that much later (a barge-in on a phone call was paused ~80 ms later
than the same speech over a wideband line: docs/benchmarks.md, "Conversation quality, round six").
Upsampling by exactly 2 needs no block: a linear-phase half-band FIR (Kaiser-windowed sinc, 127
taps at 16 kHz) passes the even output samples through unchanged and computes the odd ones from
the 64 input samples around them, so it holds back exactly 32 input samples (4 ms), whatever the
chunking. Passband flat (within 0.01 dB) to 3.6 kHz, images of 0-3.6 kHz (4.4-8 kHz) at least
70 dB down: the G.711 band (300-3400 Hz) whole, as soxr HQ keeps it, where soxr LQ's narrower band
cost Whisper words on phone calls.

The output is aligned as soxr's is: output sample ``2k`` is input sample ``k``, and the stream's
output over all chunks (with ``flush``) is exactly twice its input.
"""

from __future__ import annotations

import numpy as np

from omnivox.audio.pcm import as_float32

TAPS = 127  # the full filter at 16 kHz (odd: a centre tap); its odd phase has (TAPS + 1) // 2
_WINDOW = (TAPS + 1) // 2  # input samples each odd output sample is computed from
HOLD_BACK = _WINDOW // 2  # input samples held back for the odd phase's look-ahead
_KAISER_BETA = 6.76  # 70 dB of stopband (Kaiser's formula: 0.1102 * (70 - 8.7))


def _odd_phase() -> np.ndarray:
    """The taps that make output sample ``2k + 1`` from input samples ``k - 31 .. k + 32``."""
    centre = (TAPS - 1) // 2
    n = np.arange(TAPS)
    h = np.sinc((n - centre) / 2) * np.kaiser(TAPS, _KAISER_BETA)  # cut-off 4 kHz, gain 2
    odd = h[0::2]  # the taps an odd distance from the centre (the rest of the even phase is 0)
    return (odd / odd.sum()).astype(np.float32)  # unit gain at DC


class HalfBandUpsampler:
    """8 kHz -> 16 kHz, chunk by chunk, 4 ms behind (see the module docstring). The same calls as
    ``StreamResampler``: ``process`` each chunk, ``flush`` at the stream's end."""

    src_rate = 8000
    dst_rate = 16000
    passthrough = False

    def __init__(self) -> None:
        self._taps = _odd_phase()
        self.reset()

    def reset(self) -> None:
        """Drop the held samples: the next chunk starts a new stream."""
        # the input samples the next output pair's window begins with: at a stream's start, the 31
        # samples of silence before it
        self._history = np.zeros(_WINDOW - 1 - HOLD_BACK, np.float32)

    def process(self, chunk: np.ndarray) -> np.ndarray:
        """Upsample the next chunk; returns twice its length, less the 4 ms held back (the first
        chunks of a stream give fewer)."""
        return self.process_float32(np.ascontiguousarray(as_float32(chunk)))

    def process_float32(self, chunk: np.ndarray) -> np.ndarray:
        """``process`` for 1-D float32 a decoder made (not checked). Always a new array."""
        samples = np.concatenate([self._history, chunk])
        n = len(samples) - (_WINDOW - 1)  # output pairs whose window has all come
        if n <= 0:
            self._history = samples
            return np.zeros(0, np.float32)
        windows = np.lib.stride_tricks.sliding_window_view(samples, _WINDOW)[:n]
        out = np.empty(2 * n, np.float32)
        out[0::2] = samples[_WINDOW // 2 - 1 : _WINDOW // 2 - 1 + n]  # the input, unchanged
        out[1::2] = windows @ self._taps
        self._history = samples[n:]
        return out

    def flush(self) -> np.ndarray:
        """End the stream: the held-back tail (the silence after the stream is zeros), then reset."""
        tail = self.process_float32(np.zeros(HOLD_BACK, np.float32))
        self.reset()
        return tail
