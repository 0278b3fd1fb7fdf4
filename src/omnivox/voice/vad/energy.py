"""Where the speech really ended: the VAD's date of a pause refined by the signal's energy.

Silero's probability stays at 0.96-1.00 for 80-110 ms after the sound stops (its recurrent state
holds the speech on; docs/benchmarks.md, "Voice to voice, round seven"), so a pause dated by the
VAD alone starts that much after the caller stopped speaking, and every timer counted from it
(``server_vad``'s ``silence_duration_ms``, ``semantic_vad``'s pauses) runs that much late.

``EndRefinement.speech_end`` looks back from the VAD's date (at most ``lookback_ms``) for where the
energy fell ``drop_db`` below the utterance's speech level (a loud percentile of its recent
frames) and stayed down up to now: the speech ended there. Where the energy never clearly falls
(a noisy room, an echo, speech over the end) it answers None and the VAD's date stands; it never
dates the end later than the VAD. Pure: audio in, a sample index out, the same answer however fast
the audio came.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EndRefinement:
    """How the end of the speech is found in the energy (see the module docstring)."""

    drop_db: float = 30.0  # below the speech level by this much counts as the speech's end
    lookback_ms: float = 160.0  # the furthest before the VAD's date the end can be put
    level_ms: float = 1000.0  # the speech level is taken over this much audio before the VAD's date
    level_percentile: float = 90.0  # the speech level: this percentile of the frames' energies
    frame_ms: float = 8.0  # energy resolution
    min_level_frames: int = 8  # fewer frames of speech than this: no level, no refinement
    # the final words' decode begins where the energy fell and stayed down this long, while the
    # VAD still says speech (None: at the VAD's fall only); see ``fell``
    decode_after_ms: float | None = 48.0

    def __post_init__(self) -> None:
        if self.drop_db <= 0 or self.lookback_ms < 0 or self.frame_ms <= 0 or self.level_ms <= 0:
            raise ValueError("drop_db, frame_ms and level_ms must be positive, lookback_ms >= 0")

    def speech_end(self, audio: np.ndarray, rate: int, vad_end: int) -> int | None:
        """Where the speech ended in ``audio`` (the utterance up to now, float32 at ``rate``), given
        that the VAD puts the end at sample ``vad_end``: a sample index at most ``vad_end`` and at
        least ``lookback_ms`` before it, or None where the energy does not say (keep the VAD's)."""
        frame = max(1, round(self.frame_ms * rate / 1000))
        vad_end = min(vad_end, len(audio))
        # frames laid back from the VAD's end, so one of them starts exactly there
        back = int(self.lookback_ms * rate / 1000) // frame
        first = vad_end - back * frame
        while first < 0:
            first += frame
        after = (len(audio) - vad_end) // frame  # whole frames heard after the VAD's end
        if after < 1:
            return None  # nothing heard after the VAD's end to say the energy stayed down
        tail = audio[first : vad_end + after * frame]
        n = len(tail) // frame
        if n < 1:
            return None
        level_from = max(0, vad_end - int(self.level_ms * rate / 1000))
        speech = audio[level_from:vad_end]
        m = len(speech) // frame
        if m < self.min_level_frames:
            return None
        level = np.percentile(_db(speech[len(speech) - m * frame :], frame), self.level_percentile)
        quiet = _db(tail, frame) < level - self.drop_db
        if not quiet[-1]:
            return None  # loud again (or never fell): the VAD's date stands
        loud = np.nonzero(~quiet)[0]
        start = int(loud[-1]) + 1 if len(loud) else 0  # the quiet run that lasts up to now
        end = first + start * frame
        return end if end < vad_end else None

    def fell(self, audio: np.ndarray, rate: int, hold_ms: float) -> bool:
        """Whether the energy of ``audio`` (the utterance up to now) fell ``drop_db`` under its
        speech level and stayed down for the last ``hold_ms``: the speech may have ended there
        (the VAD, holding on, does not say so yet)."""
        frame = max(1, round(self.frame_ms * rate / 1000))
        hold = max(1, int(np.ceil(hold_ms / self.frame_ms)))
        n = len(audio) // frame
        if n < hold + self.min_level_frames:
            return False
        whole = audio[len(audio) - n * frame :]
        db = _db(whole, frame)
        level_frames = int(self.level_ms / self.frame_ms)
        level = np.percentile(db[max(0, n - hold - level_frames) : n - hold], self.level_percentile)
        return bool(np.all(db[n - hold :] < level - self.drop_db))


def _db(audio: np.ndarray, frame: int) -> np.ndarray:
    """Energy (dB of the mean square) of each whole ``frame`` of ``audio``."""
    n = len(audio) // frame
    x = audio[: n * frame].reshape(n, frame).astype(np.float64)
    return 10.0 * np.log10(np.mean(x * x, axis=1) + 1e-12)
