"""Hearing the user: VAD turn detection and streaming ASR over one input audio stream.

The ``Listener`` runs in the session's input thread (model work blocks) and turns 16 kHz audio into
``Heard`` events, all timed in stream audio time (milliseconds since the session's first sample):

- with server VAD: ``speech_started`` (with OpenAI's prefix padding), ``speech_confirmed`` once the
  speech holds ``confirm_ms`` of voiced audio (a cough or a click does not; barge-in waits for it),
  ``partial`` transcripts while the user speaks, then ``speech_stopped`` and the ``final`` transcript
  once ``silence_duration_ms`` of silence has passed. The ASR hears the speech from its padded start
  and is fed as audio arrives, so the final transcript costs only the decoder's flush.
- a pause that has run ``speculate_at`` of the way to the shortest pause that can end the turn
  (``silence_duration_ms``; with ``semantic_vad`` the eagerness's ``sure_ms``) flushes the ASR early
  and reports ``pause`` with the transcript so far: a reply can be prepared while the silence runs
  out (as Unmute does at its STT's pause prediction). The embedded models' reply (Whisper's flush,
  the LLM's first words, their speech) takes about 350 ms on one core, so the earlier the better: at
  0.3 of a 500 ms ``silence_duration_ms`` it was ready about when the turn ended, at 0.6 150 ms late
  (docs/benchmarks.md, "Voice to voice with the embedded models"); the agent asks for 0.1, the
  first VAD windows of silence (issue 23: the reply starts when the speech stops). The flush names
  where the speech ended (the pause's start): a Whisper partial that already heard that far is the
  transcript, so no second decode of the utterance stands between the pause and the reply
  (``StreamingAsr.flush``). If the user speaks again, ``resumed`` says so, the ASR hears the rest as
  a new utterance, and the final transcript joins both.
- a pause is dated where the signal's energy fell (``end_refinement``, ``voice.vad.energy``): Silero's
  probability stays up 80-110 ms after the sound stops, so the VAD alone dates every pause that much
  late. With server VAD the silence timers (``silence_duration_ms``, ``speculate_at``) and
  ``audio_end_ms`` count from the energy's date; ``semantic_vad``'s pauses keep the VAD's (counted
  from the energy's, they cut paused questions early). The final words' decode
  begins ``decode_after_ms`` into the energy's drop, while the VAD still says speech (once per
  drop: a drop inside a sentence costs one partial more), and the flush names the dated end it
  covers; without it the recogniser hears to the VAD's end. Where the energy does not clearly fall
  (noise, echo) the VAD's date stands.
- with ``semantic_vad`` (``TurnParams.eagerness``), as with server VAD, but an end-of-turn model
  judges each pause once it is due (``voice.turn.semantic``): the ASR has been flushed and ``pause``
  reported before (the reply is prepared while the model listens; at the latest when the judgement
  is due), then the model's judgement sets how long this pause must last to end the turn: short when
  the words sound finished, up to the eagerness's longest wait when they do not; the words flushed
  at the pause are the second witness (``voice.turn.words``: a flat voice's finished sentence, a
  fragment said with a final cadence).
  ``semantic.scores`` keeps every judgement.
- without turn detection (manual turns): every sample goes to the ASR; ``commit`` ends the utterance.

With an echo canceller (``echo``), ``feed`` takes the assistant's audio that was playing while the
chunk was recorded (``reference``) and everything above hears the microphone with that echo removed:
the assistant's own voice coming back through a speaker does not start a turn or a barge-in. With a
noise suppressor (``noise``: ``noise_reduction``), what the VAD and the ASR hear is then denoised.
``peek`` decodes the utterance so far now (a barge-in decision that cannot wait for the next partial).

Each transcript (``partial``, ``pause``, ``final``, ``peek_heard``) carries what the interruption
judge weighs besides the words: the recogniser's scores (Whisper's no-speech probability and mean
log-probability), the utterance's voiced milliseconds, and how loud the microphone was over it
against the assistant's audio playing meanwhile (``over_echo_db``; None with nothing playing).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from omnivox.voice.asr.base import SpeechScores, StreamingAsr, Transcript
from omnivox.voice.echo.base import EchoCanceller
from omnivox.voice.noise.suppressor import NoiseSuppressor
from omnivox.voice.turn.base import EndOfTurnModel
from omnivox.voice.turn.semantic import SemanticTurn
from omnivox.voice.vad.base import VoiceActivityDetector
from omnivox.voice.vad.energy import EndRefinement
from omnivox.voice.vad.turn import TurnDetector, TurnEventType, TurnParams, TurnState
from omnivox.voice.witness import backchannel_margin

log = logging.getLogger(__name__)

HeardKind = Literal[
    "speech_started", "speech_confirmed", "partial", "pause", "resumed", "speech_stopped", "final"
]
_KEEP_MS = 8500  # recent audio kept: prefix padding (up to 5 s) and the end-of-turn model's 8 s
DEFAULT_END_REFINEMENT = EndRefinement()
_SILENT = 3e-4  # a reference chunk quieter than this (RMS, about -70 dBFS) plays nothing


@dataclass(frozen=True)
class Heard:
    kind: HeardKind
    audio_ms: float = 0.0  # started: audio_start_ms (padded); stopped: audio_end_ms; else: now
    text: str = ""  # partial / final transcripts
    # monotonic time it was heard: a turn's breakdown tells the turn's end (speech_stopped) from
    # its final transcript (the ASR's flush), both heard in one chunk
    at: float = field(default_factory=time.monotonic, compare=False)
    scores: SpeechScores | None = None  # the recogniser's, on the last words decoded (transcripts)
    voiced_ms: float = 0.0  # voiced audio in the utterance so far (transcripts)
    over_echo_db: float | None = None  # microphone level over the utterance against the reference
    # the best backchannel's forced score less the words' (``voice.witness``; settled transcripts
    # of a short utterance over a reply only, else None)
    backchannel_margin: float | None = None


@dataclass
class _Levels:
    """Energy of one utterance's microphone audio, and of the reference while it played."""

    mic: float = 0.0
    mic_n: int = 0
    ref: float = 0.0
    ref_n: int = 0

    def add(self, mic: np.ndarray, reference: np.ndarray | None) -> None:
        self.mic += float(np.dot(mic, mic))
        self.mic_n += len(mic)
        if reference is not None and len(reference):
            energy = float(np.dot(reference, reference))
            if energy / len(reference) > _SILENT**2:
                self.ref += energy
                self.ref_n += len(reference)

    @property
    def over_reply(self) -> bool:
        """Whether a reply played while the utterance was heard."""
        return self.ref_n > 0

    def over_echo_db(self) -> float | None:
        if not self.ref_n or not self.mic_n or self.mic <= 0:
            return None
        return float(10 * np.log10((self.mic / self.mic_n) / (self.ref / self.ref_n)))


class Listener:
    def __init__(
        self,
        vad: VoiceActivityDetector,
        asr: StreamingAsr,
        params: TurnParams | None,
        confirm_ms: float,
        speculate_at: float | None = 0.3,
        end_of_turn: EndOfTurnModel | None = None,
        echo: EchoCanceller | None = None,
        turn_words: bool = True,
        witness: bool = True,
        end_refinement: EndRefinement | None = DEFAULT_END_REFINEMENT,
    ) -> None:
        # ``witness``: a short utterance heard over a reply gets the backchannel witness's margin
        self.witness = witness
        self._witnessed: tuple[int, str, float | None] | None = None  # (turn start, words, margin)
        self.vad = vad
        self.turn_words = turn_words  # semantic_vad weighs the words heard with the model's judgement
        self.noise: NoiseSuppressor | None = None  # noise_reduction, after the echo canceller
        self.echo = echo
        self.asr = asr
        self.end_of_turn = end_of_turn
        self.semantic: SemanticTurn | None = None  # semantic_vad's judge of pauses
        self.rate = vad.sample_rate
        self.confirm_ms = confirm_ms
        # recent audio (``_ring``): the stream from sample ``_ring_start`` on, held in ``_buffer``
        # (which starts at stream sample ``_buffer_start`` and is filled up to ``_filled``)
        self._buffer = np.zeros(0, np.float32)
        self._buffer_start = 0
        self._filled = 0
        self._ring_start = 0  # stream sample index of _ring[0]
        self.samples = 0  # stream samples received
        self._asr_from: int | None = None  # next sample the ASR should hear; None: not listening
        self._utterance_from = 0  # stream sample where the ASR's current utterance began
        self._quiet_from: float | None = None  # while speaking: where the VAD's probability fell under
        # its threshold and has stayed (the speech ended there, if this becomes the pause)
        self._voiced_ms = 0.0
        self._confirmed = False
        self.pending_samples = 0  # audio since the last turn end / commit / clear
        self.speculate_at = speculate_at
        self._early: str | None = None  # transcript flushed at a pause, while the turn is still open
        self._turn_from = 0  # stream sample where the current turn's audio begins (padded)
        self._levels = _Levels()  # the current utterance's (from speech_started)
        self._early_scores: SpeechScores | None = None  # the scores of the words flushed at a pause
        self.detector: TurnDetector | None = None
        # where a pause begins: the VAD's date refined by the energy (None: the VAD's alone)
        self.end_refinement: EndRefinement | None = end_refinement
        self.end_refinements = [0, 0]  # pauses looked at, pauses dated sooner
        self.end_refined_ms = 0.0  # how much sooner, all of them together
        # the last pause the energy dated: (its start as the detector counts it, where the energy
        # fell, the VAD's speech end)
        self._dated: tuple[float, float, float] | None = None
        self._dropped_at: int | None = None  # samples heard when the decode at the energy's drop began
        self.drop_decodes = 0  # decodes begun at an energy drop (``EndRefinement.decode_after_ms``)
        self.configure(params)

    @property
    def audio_ms(self) -> float:
        return self.samples * 1000.0 / self.rate

    @property
    def background_s(self) -> float:
        """Hearing work done outside ``feed`` so far (the ASR's background partials)."""
        return self.asr.background_s

    @property
    def pause_started_ms(self) -> float | None:
        """Where the user's current pause began (None: no pause, or nobody speaking)."""
        return self.detector.pause_started_ms if self.detector is not None else None

    @property
    def speaking(self) -> bool:
        return self.detector is not None and self.detector.state is TurnState.SPEECH

    def configure(self, params: TurnParams | None, witness: bool | None = None) -> None:
        """New turn detection settings (None: manual turns). An utterance in progress is kept.
        ``witness``: whether to compute the backchannel witness from now on (None: as it was)."""
        if witness is not None:
            self.witness = witness
        if params is None:
            self.detector, self.semantic = None, None
            return
        semantic = None
        if params.eagerness is not None and self.end_of_turn is not None:
            semantic = SemanticTurn.for_eagerness(self.end_of_turn, params.eagerness, self.turn_words)
            params = replace(params, silence_duration_ms=int(semantic.max_ms))
        if self.detector is not None and self.detector.params == params:
            return
        self.semantic = semantic
        detector = TurnDetector(params, self.vad.window_ms)
        detector.audio_ms = self.vad.audio_ms  # continue on the stream clock
        self.detector = detector

    def feed(self, audio: np.ndarray, reference: np.ndarray | None = None) -> list[Heard]:
        """Hear the next chunk (float32 at the VAD rate); ``reference``: the assistant's audio that
        played meanwhile (same length), whose echo is removed first (None: no echo guard)."""
        mic = audio
        if reference is not None and self.echo is not None:
            audio = self.echo.process(audio, reference)
        if self.noise is not None:
            audio = self.noise.process(audio)
        self._remember(audio)
        self.samples += len(audio)
        self.pending_samples += len(audio)
        heard: list[Heard] = []
        if self.detector is None:
            if self._asr_from is None:
                self._asr_from = self.samples - len(audio)
            self._hear(heard)
            return heard
        window_ms = self.vad.window_ms
        threshold = self.detector.params.threshold
        for prob in self.vad.process(audio):
            paused = self.detector.pause_started_ms is not None
            event = self.detector.push(float(prob))
            if event is not None and event.type is TurnEventType.SPEECH_STARTED:
                heard.append(Heard("speech_started", event.audio_ms))
                self._asr_from = max(self._ring_start, int(event.audio_ms * self.rate / 1000))
                self._turn_from = self._asr_from
                self._voiced_ms, self._confirmed = 0.0, False
                self._dropped_at = None
                self._levels = _Levels()
            if self.detector.state is TurnState.SPEECH and prob < threshold and self._quiet_from is None:
                self._fell_quiet(heard)
            if not paused and self.detector.pause_started_ms is not None:
                self._date_pause()
            if self.detector.state is TurnState.SPEECH and prob >= threshold:
                self._quiet_from = None
                self._voiced_ms += window_ms
                if not self._confirmed and self._voiced_ms >= self.confirm_ms:
                    self._confirmed = True
                    heard.append(Heard("speech_confirmed", self.detector.audio_ms))
                if self._early is not None and self._asr_from is None:  # words after a pause: go on
                    back = self._sample_at(self.detector.audio_ms - 2 * window_ms)
                    self._asr_from = max(self._ring_start, back)
                    heard.append(Heard("resumed", self.detector.audio_ms))
            if event is not None and event.type is TurnEventType.SPEECH_STOPPED:
                self._hear(heard, until=self._sample_at(self.detector.audio_ms))
                heard.append(Heard("speech_stopped", event.audio_ms))
                heard.append(self._final(speech_end_ms=self._speech_end(event.audio_ms)))
            elif self.semantic is not None and self.semantic.due(
                self.detector.pause_started_ms, self.detector.pause_ms
            ):
                if self.speculate_at is not None and self._asr_from is not None:
                    # the pause is due its flush and its judgement at once (dated by the energy,
                    # it is already long when the VAD sees it): the model judges the audio while
                    # the words' decode (begun where the VAD fell) runs in the recogniser's thread
                    self._hear(heard, until=self._sample_at(self.detector.audio_ms))
                    judged = self.semantic.probability(self._turn_audio())
                    self._speculate(heard)
                    self._judge(judged)
                else:
                    self._judge()
            elif self._pausing():
                self._speculate(heard)
        if self.detector.state is TurnState.SPEECH:
            self._levels.add(mic, reference)
            self._decode_at_drop(heard)
        self._hear(heard)
        return heard

    def _decode_at_drop(self, heard: list[Heard]) -> None:
        """While the VAD still says speech: where the energy fell and stayed down
        ``decode_after_ms`` (``EndRefinement``), start the final words' decode now, as the VAD's
        fall would 80-110 ms later (``_fell_quiet``). Once per drop; if the speech goes on, it was
        one partial more."""
        refine = self.end_refinement
        if refine is None or refine.decode_after_ms is None or self._asr_from is None:
            return
        if self._quiet_from is not None:
            return  # the VAD has fallen: its own decode has begun
        # only what ``fell`` looks at: the level's second and the hold (~40 us a chunk while speaking)
        held_ms = refine.level_ms + refine.decode_after_ms + 2 * refine.frame_ms
        recent = self.samples - int(held_ms * self.rate / 1000)
        lo = max(self._turn_from, self._ring_start, recent)
        fell = refine.fell(self._ring[lo - self._ring_start :], self.rate, refine.decode_after_ms)
        if not fell:
            self._dropped_at = None
            return
        if self._dropped_at is not None:
            return  # this drop's decode has begun
        self._hear(heard)
        self._dropped_at = self.samples
        self.drop_decodes += 1
        self.asr.decode_now()

    def _speculate(self, heard: list[Heard]) -> None:
        """Flush the ASR at a pause and report the words so far, for a reply prepared in the pause."""
        assert self.detector is not None
        self._hear(heard, until=self._sample_at(self.detector.audio_ms))
        flushed = self._flush(self._speech_end(self.detector.pause_started_ms))
        text = flushed.text if flushed is not None else ""
        if flushed is not None and flushed.scores is not None:
            self._early_scores = flushed.scores
        self._early = " ".join(t for t in (self._early, text) if t)
        self._asr_from = None  # the silence that follows is not heard
        heard.append(
            self._transcript("pause", self.detector.audio_ms, self._early, self._early_scores, settled=True)
        )

    def _turn_audio(self) -> np.ndarray:
        """The turn's audio up to the last VAD window."""
        assert self.detector is not None
        end = self._sample_at(self.detector.audio_ms) - self._ring_start
        return self._ring[max(0, self._turn_from - self._ring_start) : end]

    def _judge(self, judged: tuple[float, float] | None = None) -> None:
        """semantic_vad: the end-of-turn model hears the turn so far; its judgement sets the pause.
        ``judged``: the model's answer on that audio, asked already (``SemanticTurn.probability``)."""
        assert self.detector is not None and self.semantic is not None
        started = self.detector.pause_started_ms
        assert started is not None
        audio = self._turn_audio()
        score = self.semantic.score(audio, started, self.detector.audio_ms, self._early or "", judged)
        self.detector.require_pause(score.required_ms)
        log.debug(
            "end of turn: P(finished)=%.2f, words %r complete=%s after %.0f ms of pause -> %s, "
            "wait %.0f ms (model %.0f ms)",
            score.probability,
            score.text,
            score.words_complete,
            score.pause_ms,
            score.tier,
            score.required_ms,
            score.model_s * 1000,
        )

    def _pausing(self) -> bool:
        """A pause has just run far enough to flush the ASR early (once per pause): ``speculate_at``
        of the shortest pause that can end the turn."""
        d = self.detector
        if (
            self.speculate_at is None
            or self._asr_from is None
            or d is None
            or d.state is not TurnState.SPEECH
        ):
            return False
        if d.pause_started_ms is None:
            return False
        shortest = self.semantic.policy.sure_ms if self.semantic is not None else d.required_ms
        return d.pause_ms >= self.speculate_at * shortest

    def peek(self) -> str:
        """The words of the utterance in progress, decoded now ("" outside one)."""
        return self.peek_heard().text

    def peek_heard(self) -> Heard:
        """The utterance in progress, decoded now, as a ``partial`` with its evidence."""
        if self._asr_from is not None:
            self._hear([])
        now = self.asr.peek() if self.asr.in_utterance else None
        words = now.text if now is not None else ""
        scores = now.scores if now is not None and now.scores is not None else self._early_scores
        text = " ".join(t for t in (self._early, words) if t)
        return self._transcript("partial", self.audio_ms, text, scores, settled=True)

    def commit(self) -> Heard:
        """End the user's utterance now (manual turns, or a client commit mid-speech)."""
        self._hear([])
        if self.detector is not None and self.detector.state is TurnState.SPEECH:
            self.detector.reset_turn()
        return self._final()

    def clear(self) -> None:
        """Drop the audio heard since the last turn (and any utterance in progress)."""
        if self.asr.in_utterance:
            self.asr.flush()
        self._asr_from, self._early, self._early_scores = None, None, None
        self.pending_samples = 0
        if self.detector is not None and self.detector.state is TurnState.SPEECH:
            self.detector.reset_turn()

    def transcribe_clip(self, audio: np.ndarray) -> str:
        """A whole clip outside the live stream (an audio item a client created)."""
        if self.asr.in_utterance:
            raise RuntimeError("the recogniser is busy with live speech")
        return self.asr.transcribe(audio).text

    # ---- internals

    def _fell_quiet(self, heard: list[Heard]) -> None:
        """The VAD's probability fell under its threshold while the user speaks: the speech may have
        ended here. The ASR starts decoding what it heard now (``StreamingAsr.decode_now``), so if
        this is the pause that ends the turn its words are ready sooner after it."""
        assert self.detector is not None
        self._quiet_from = self.detector.audio_ms - self.vad.window_ms
        if self._asr_from is not None:
            self._hear(heard, until=self._sample_at(self.detector.audio_ms))
            self.asr.decode_now()

    def _date_pause(self) -> None:
        """A pause has begun (the VAD's probability fell under its threshold less the hysteresis):
        find where the signal's energy fell, if it clearly did (``end_refinement``). With server VAD
        the pause is dated there, so ``silence_duration_ms`` counts from the caller's real end and
        not from the VAD's, 80-110 ms later. With ``semantic_vad`` the pause keeps the VAD's date:
        its pauses were set on the VAD's dates, and counted from the energy's they cut espeak-ng's
        paused questions early (3-6 in 20 turns at high eagerness, against main's 1); only the
        recogniser's end (``_speech_end``) uses the energy's."""
        assert self.detector is not None
        refine = self.end_refinement
        vad_end_ms = self._speech_end(self.detector.pause_started_ms)
        if refine is None or vad_end_ms is None:
            return
        self.end_refinements[0] += 1
        lo = max(self._turn_from, self._ring_start)
        audio = self._ring[lo - self._ring_start : self._sample_at(self.detector.audio_ms) - self._ring_start]
        end = refine.speech_end(audio, self.rate, self._sample_at(vad_end_ms) - lo)
        if end is None:
            return
        end_ms = (lo + end) * 1000.0 / self.rate
        if self.detector.params.eagerness is None:
            self.detector.date_pause(end_ms)
        started = self.detector.pause_started_ms
        assert started is not None
        self._dated = (started, end_ms, vad_end_ms)  # speech_end: before the VAD's end
        self.end_refinements[1] += 1
        self.end_refined_ms += vad_end_ms - end_ms

    def _speech_end(self, pause_started_ms: float | None) -> float | None:
        """Where the speech of the pause that began at ``pause_started_ms`` ended, for the
        recogniser: where the VAD's probability fell under its threshold (its pause starts lower,
        with the hysteresis). A pause dated sooner by the energy keeps the VAD's end here (the
        same audio, the same words), unless the decode begun at the energy's drop heard past the
        dated end: then that end, so the flush takes that decode's words."""
        if self._dated is not None and pause_started_ms == self._dated[0]:
            _, dated, vad_end = self._dated
            if self._dropped_at is not None and self._dropped_at >= self._sample_at(dated):
                return dated  # the decode begun at the energy's drop heard that far: its words
            return vad_end  # a pause dated by the energy: the recogniser's end is the VAD's
        if pause_started_ms is None or self._quiet_from is None:
            return pause_started_ms
        return min(self._quiet_from, pause_started_ms)

    def _flush(self, speech_end_ms: float | None) -> Transcript | None:
        """End the ASR's utterance (None: it heard none). With ``speech_end_ms`` (where the speech
        ended), a partial that already heard that far serves as the final transcript: no decode of
        the utterance again on the way to the reply."""
        if not self.asr.in_utterance:
            return None
        if speech_end_ms is None:
            return self.asr.flush()
        return self.asr.flush(max(0.0, speech_end_ms - self._utterance_from * 1000 / self.rate))

    def _final(self, speech_end_ms: float | None = None) -> Heard:
        flushed = self._flush(speech_end_ms)
        rest = flushed.text if flushed is not None else ""
        scores = flushed.scores if flushed is not None and rest else self._early_scores
        text = " ".join(t for t in (self._early, rest) if t)
        self._asr_from, self._early, self._early_scores = None, None, None
        self.pending_samples = 0
        return self._transcript("final", self.audio_ms, text, scores, settled=True)

    def _transcript(
        self, kind: HeardKind, audio_ms: float, text: str, scores: SpeechScores | None, settled: bool = False
    ) -> Heard:
        """A transcript event with the utterance's evidence (see the module docstring); a
        ``settled`` one (a pause's, the final, one decoded now) of a short utterance over a reply
        with the backchannel witness's margin too."""
        return Heard(
            kind,
            audio_ms,
            text,
            scores=scores,
            voiced_ms=self._voiced_ms,
            over_echo_db=self._levels.over_echo_db(),
            backchannel_margin=self._witness(text) if settled else None,
        )

    def _witness(self, text: str) -> float | None:
        """The backchannel witness on the turn's audio so far (once per turn and words: a pause's
        words are often the final's)."""
        if not self.witness or not text or not self._levels.over_reply:
            return None
        if self._witnessed is not None and self._witnessed[:2] == (self._turn_from, text):
            return self._witnessed[2]
        audio = self._ring[max(0, self._turn_from - self._ring_start) :]
        margin = backchannel_margin(self.asr, audio, text)
        self._witnessed = (self._turn_from, text, margin)
        return margin

    def _hear(self, heard: list[Heard], until: int | None = None) -> None:
        """Feed the ASR what it has not heard yet, up to ``until`` (default: everything)."""
        if self._asr_from is None:
            return
        end = self.samples if until is None else min(until, self.samples)
        if end <= self._asr_from:
            return
        if not self.asr.in_utterance:
            self._utterance_from = self._asr_from
        lo = self._asr_from - self._ring_start
        partial: Transcript | None = self.asr.feed(self._ring[lo : end - self._ring_start])
        self._asr_from = end
        if partial is not None and partial.text:
            heard.append(self._transcript("partial", self.audio_ms, partial.text, partial.scores))

    @property
    def _ring(self) -> np.ndarray:
        return self._buffer[self._ring_start - self._buffer_start : self._filled]

    def _remember(self, audio: np.ndarray) -> None:
        """Add a chunk to the recent audio, forgetting what is older than ``_KEEP_MS`` (but never
        audio the ASR still has to hear). The buffer has room for many chunks and is moved only
        when full (about every ``_KEEP_MS``): a paced 40 ms chunk no longer copies 8.5 s of audio
        (~180 us a chunk on a busy core). Filled samples are never written again (a full buffer is
        replaced, not shifted), so the slices handed to the ASR and the end-of-turn model keep
        their audio."""
        keep = int(_KEEP_MS * self.rate / 1000)
        n = len(audio)
        if self._filled + n > len(self._buffer):
            held = self._ring
            buffer = np.empty(max(2 * keep, 2 * (len(held) + n)), np.float32)
            buffer[: len(held)] = held
            self._buffer, self._buffer_start, self._filled = buffer, self._ring_start, len(held)
        self._buffer[self._filled : self._filled + n] = audio
        self._filled += n
        cut = self._filled - (self._ring_start - self._buffer_start) - keep
        if cut > 0:
            if self._asr_from is not None:
                cut = min(cut, self._asr_from - self._ring_start)
            self._ring_start += cut

    def _sample_at(self, ms: float) -> int:
        return int(ms * self.rate / 1000)
