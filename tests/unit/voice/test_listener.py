"""The listener: VAD turn detection and streaming ASR over one stream (real silero + PocketSphinx)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from omnivox.audio.resample import resample
from omnivox.voice.asr.base import Hypothesis, StreamingAsr, Transcript, word_error_rate
from omnivox.voice.listener import Listener
from omnivox.voice.vad.base import VoiceActivityDetector
from omnivox.voice.vad.turn import TurnParams
from speech import WEATHER


@pytest.fixture(scope="module")
def models():
    from omnivox.voice.asr.pocketsphinx_asr import PocketsphinxAsr
    from omnivox.voice.tts.hibari import HibariTts
    from omnivox.voice.vad.silero import SileroVad

    speech = np.concatenate([c.audio for c in HibariTts(seed=0).synthesize(WEATHER)])
    return SileroVad(16000), PocketsphinxAsr(), resample(speech, 24000, 16000)


def hear(listener: Listener, audio: np.ndarray, frame: int = 320) -> list:
    out = []
    for i in range(0, len(audio), frame):
        out += listener.feed(audio[i : i + frame])
    return out


def test_listener_hears_a_turn_with_padding_confirmation_and_transcript(models) -> None:
    vad, asr, speech = models
    vad.reset(), asr.reset()
    listener = Listener(vad, asr, TurnParams(silence_duration_ms=500, prefix_padding_ms=300), confirm_ms=150)
    audio = np.concatenate([np.zeros(16000, np.float32), speech, np.zeros(16000, np.float32)])
    heard = hear(listener, audio)
    kinds = [h.kind for h in heard]
    assert kinds[0] == "speech_started" and kinds[1] == "speech_confirmed"
    assert kinds[-2:] == ["speech_stopped", "final"] and "partial" in kinds
    started, stopped, final = heard[0], heard[-2], heard[-1]
    loud = np.nonzero(np.abs(audio) > 0.02)[0]
    true_start = loud[0] / 16  # ms
    assert true_start - 300 - 64 <= started.audio_ms <= true_start  # up to 300 ms of padding before it
    assert stopped.audio_ms < final.audio_ms  # the end of speech, reported once the silence has run
    assert word_error_rate(WEATHER, final.text) <= 0.1
    assert not listener.speaking and not asr.in_utterance


def test_a_pause_flushes_early_and_more_speech_resumes_the_same_turn(models) -> None:
    vad, asr, speech = models
    vad.reset(), asr.reset()
    listener = Listener(vad, asr, TurnParams(silence_duration_ms=500), confirm_ms=150, speculate_at=0.6)
    loud = np.nonzero(np.abs(speech) > 0.02)[0]
    words = speech[loud[0] : loud[-1] + 1]
    gap = np.zeros(int(0.45 * 16000), np.float32)
    heard = hear(listener, np.concatenate([gap, words, gap, words, np.zeros(16000, np.float32)]))
    kinds = [h.kind for h in heard]
    assert kinds.count("speech_started") == 1 and kinds.count("speech_stopped") == 1
    assert kinds.index("pause") < kinds.index("resumed") < kinds.index("speech_stopped")
    pause = heard[kinds.index("pause")]
    assert word_error_rate(WEATHER, pause.text) <= 0.1  # the first sentence, flushed at the pause
    final = heard[-1]
    assert final.kind == "final" and word_error_rate(f"{WEATHER} {WEATHER}", final.text) <= 0.2
    # the end of the turn gets its own early flush too: a reply is prepared before the stop
    assert kinds.count("pause") == 2 and kinds[-3:] == ["pause", "speech_stopped", "final"]


def test_a_click_is_not_confirmed_speech(models) -> None:
    vad, asr, speech = models
    vad.reset(), asr.reset()
    listener = Listener(vad, asr, TurnParams(), confirm_ms=150)
    click = speech[4000:5000]  # ~60 ms of a syllable, then silence
    heard = hear(listener, np.concatenate([np.zeros(8000, np.float32), click, np.zeros(16000, np.float32)]))
    assert "speech_confirmed" not in [h.kind for h in heard]


def test_manual_turns_feed_everything_and_commit_ends_the_utterance(models) -> None:
    vad, asr, speech = models
    vad.reset(), asr.reset()
    listener = Listener(vad, asr, None, confirm_ms=150)
    heard = hear(listener, speech)
    assert "speech_started" not in [h.kind for h in heard]
    assert listener.pending_samples == len(speech)
    final = listener.commit()
    assert final.kind == "final" and word_error_rate(WEATHER, final.text) <= 0.1
    assert listener.pending_samples == 0
    hear(listener, speech[:8000])
    listener.clear()
    assert listener.pending_samples == 0 and not asr.in_utterance


# ---- semantic_vad: smart-turn judges each pause (real model, hibari speech)

FINISHED = "Can you tell me a short story about a fox?"
UNFINISHED = "So I was thinking that maybe we could"


@pytest.fixture(scope="module")
def smart_turn():
    from omnivox.voice.turn.smart_turn import SmartTurn

    return SmartTurn()


@functools.cache
def spoken(text: str) -> np.ndarray:
    """hibari saying ``text``, 16 kHz, cut at the last loud sample (the pause is added by the test)."""
    from omnivox.voice.tts.hibari import HibariTts

    audio = resample(np.concatenate([c.audio for c in HibariTts(seed=0).synthesize(text)]), 24000, 16000)
    return audio[: np.nonzero(np.abs(audio) > 0.02)[0][-1] + 1]


def semantic_turn(models, smart_turn, text: str, eagerness: str, pause_s: float):
    vad, asr, _ = models
    vad.reset(), asr.reset()
    params = TurnParams(eagerness=eagerness)
    listener = Listener(vad, asr, params, confirm_ms=150, end_of_turn=smart_turn)
    lead, pause = np.zeros(8000, np.float32), np.zeros(int(pause_s * 16000), np.float32)
    return listener, hear(listener, np.concatenate([lead, spoken(text), pause]))


def test_semantic_vad_waits_longer_after_an_unfinished_sentence(models, smart_turn) -> None:
    finished, heard_finished = semantic_turn(models, smart_turn, FINISHED, "high", 1.0)
    unfinished, heard_unfinished = semantic_turn(models, smart_turn, UNFINISHED, "high", 1.0)
    (done,) = finished.semantic.scores
    (waiting,) = unfinished.semantic.scores
    assert done.tier in ("sure", "finished") and waiting.tier == "max_pause"
    assert done.probability > waiting.probability
    assert waiting.required_ms > done.required_ms
    # the decisions as the session sees them: the finished turn ended within the second of silence,
    # the unfinished one is still open (high eagerness waits up to 2 s for the rest of the sentence)
    assert [h.kind for h in heard_finished][-2:] == ["speech_stopped", "final"]
    assert "speech_stopped" not in [h.kind for h in heard_unfinished] and unfinished.speaking
    # a reply was prepared for both while the model judged the pause
    assert "pause" in [h.kind for h in heard_finished] and "pause" in [h.kind for h in heard_unfinished]


@pytest.mark.parametrize("refine", [False, True])
def test_the_words_are_flushed_for_a_reply_as_the_speech_stops_before_the_pause_is_judged(
    models, smart_turn, refine
) -> None:
    vad, asr, _ = models
    vad.reset(), asr.reset()
    kwargs = {} if refine else {"end_refinement": None}
    listener = Listener(
        vad, asr, TurnParams(eagerness="high"), 150, speculate_at=0.1, end_of_turn=smart_turn, **kwargs
    )
    audio = np.concatenate([np.zeros(8000, np.float32), spoken(FINISHED), np.zeros(16000, np.float32)])
    heard = hear(listener, audio)
    kinds = [h.kind for h in heard]
    pause, stopped = heard[kinds.index("pause")], heard[kinds.index("speech_stopped")]
    (score,) = listener.semantic.scores
    assert kinds.index("pause") < kinds.index("speech_stopped")
    # 0.1 of high's shortest pause (200 ms): the first silent VAD window, before the judgement; the
    # energy's date does not move semantic_vad's pause (it only finds it: the recogniser's end)
    assert listener.end_refinements[0] == (1 if refine else 0)
    assert pause.audio_ms - stopped.audio_ms <= 3 * 32 and pause.audio_ms < score.at_ms
    assert word_error_rate(FINISHED, pause.text) <= 0.2 and heard[-1].text == pause.text


def test_semantic_vad_ends_an_unfinished_turn_after_the_longest_wait(models, smart_turn) -> None:
    listener, heard = semantic_turn(models, smart_turn, UNFINISHED, "high", 2.5)
    kinds = [h.kind for h in heard]
    assert kinds[-2:] == ["speech_stopped", "final"]
    (score,) = listener.semantic.scores
    assert score.tier == "max_pause" and score.required_ms == listener.semantic.max_ms == 2000


@pytest.mark.parametrize("eagerness", ["low", "medium", "high", "auto"])
def test_each_eagerness_judges_the_pause_at_half_its_shortest_wait(models, smart_turn, eagerness) -> None:
    listener, _ = semantic_turn(models, smart_turn, FINISHED, eagerness, 0.8)
    policy = listener.semantic.policy
    (score,) = listener.semantic.scores
    assert score.pause_ms >= listener.semantic.probe_ms == policy.sure_ms / 2
    assert score.required_ms in (policy.sure_ms, policy.finished_ms)


def test_without_an_end_of_turn_model_semantic_vad_is_served_by_the_plain_vad(models) -> None:
    vad, asr, _ = models
    vad.reset(), asr.reset()
    listener = Listener(vad, asr, TurnParams(eagerness="high"), confirm_ms=150)
    assert listener.semantic is None and listener.detector.params.silence_duration_ms == 500


@pytest.fixture(scope="module")
def whisper():
    from omnivox.voice.asr.whisper_asr import WhisperAsr

    return WhisperAsr()


def telephone(audio: np.ndarray) -> np.ndarray:
    from omnivox.audio.g711 import ulaw_decode, ulaw_encode

    return resample(ulaw_decode(ulaw_encode(resample(audio, 16000, 8000))), 8000, 16000)


@pytest.mark.parametrize("line", ["wide", "g711"])
def test_a_flat_voices_finished_sentence_ends_on_its_words(models, smart_turn, whisper, espeak, line) -> None:
    # espeak-ng says it without a final fall: smart-turn alone hears an unfinished turn (0.01-0.02)
    vad, _, _ = models
    speech = espeak("My phone number is five five five one two three four.")
    speech = telephone(speech) if line == "g711" else speech
    lead, pause = np.zeros(8000, np.float32), np.zeros(16000, np.float32)
    for use_words, tier in ((False, "max_pause"), (True, "finished")):
        vad.reset(), whisper.reset()
        listener = Listener(
            vad, whisper, TurnParams(eagerness="medium"), 150, end_of_turn=smart_turn, turn_words=use_words
        )
        heard = hear(listener, np.concatenate([lead, speech, pause]))
        (score,) = listener.semantic.scores
        assert score.probability < 0.5 and score.tier == tier
        ended = "speech_stopped" in [h.kind for h in heard]  # within the second of silence
        assert ended is use_words
    assert score.words_complete is True and "phone" in score.text.lower()


def test_a_fragment_with_a_final_cadence_waits_for_the_rest(models, smart_turn, whisper) -> None:
    # hibari says "Can you remind me to" as if it were done (smart-turn: 0.98); its words are not
    vad, _, _ = models
    vad.reset(), whisper.reset()
    listener = Listener(vad, whisper, TurnParams(eagerness="medium"), 150, end_of_turn=smart_turn)
    lead, pause = np.zeros(8000, np.float32), np.zeros(16000, np.float32)
    heard = hear(listener, np.concatenate([lead, spoken("Can you remind me to"), pause]))
    (score,) = listener.semantic.scores
    assert score.probability >= 0.5 and score.words_complete is False and score.tier == "max_pause"
    assert "speech_stopped" not in [h.kind for h in heard] and listener.speaking


# ---- the speech's end, named to the recogniser (a fake VAD and a recording recogniser)


class LevelVad(VoiceActivityDetector):
    """A window's loudness is its speech probability: loud 0.9, faint 0.45 (under the threshold,
    over the silence's), quiet 0.05."""

    sample_rate = 16000
    window_samples = 512  # 32 ms

    def _score(self, window: np.ndarray) -> float:
        peak = float(np.abs(window).max())
        return 0.9 if peak > 0.1 else 0.45 if peak > 0.001 else 0.05

    def _reset_state(self) -> None:
        pass


class RecordingAsr(StreamingAsr):
    def __init__(self) -> None:
        super().__init__()
        self.heard = 0
        self.ahead: list[int] = []  # samples heard at each decode_now
        self.flushed: list[float | None] = []

    def _process(self, audio: np.ndarray) -> Hypothesis | None:
        self.heard += len(audio)
        return None

    def _end(self) -> Hypothesis:
        return ("words", ())

    def decode_now(self) -> None:
        self.ahead.append(self.heard)

    def flush(self, speech_ms: float | None = None) -> Transcript:
        self.flushed.append(speech_ms)
        return super().flush(speech_ms)


def level(ms: int, amplitude: float) -> np.ndarray:
    return np.full(ms * 16, amplitude, np.float32) * np.where(np.arange(ms * 16) % 2, 1, -1)


def test_the_flush_at_the_pause_names_where_the_speech_fell_under_the_threshold() -> None:
    asr = RecordingAsr()
    listener = Listener(
        LevelVad(), asr, TurnParams(silence_duration_ms=500), confirm_ms=150, speculate_at=0.1
    )
    # speech from 192 ms (its window), padded back to 0; loud to 1000 ms, faint 1024-1088, quiet after
    audio = np.concatenate([level(200, 0), level(800, 0.3), level(24, 0), level(64, 0.01), level(900, 0)])
    heard = hear(listener, audio, frame=640)
    kinds = [h.kind for h in heard]
    assert kinds.count("pause") == 1 and kinds[-2:] == ["speech_stopped", "final"]
    # it fell under the threshold at the window from 1024 ms (the ASR had heard to its end then, and
    # began decoding); the pause (under threshold - hysteresis) began only at 1088 ms
    assert asr.ahead == [1056 * 16]
    assert asr.flushed == [1024.0]  # the speech: the utterance's first 1024 ms


class _KeepingAsr:
    """A recogniser that keeps the very arrays it is fed (no copy), to check they never change."""

    streaming = True
    background_s = 0.0

    def __init__(self) -> None:
        self.fed: list[np.ndarray] = []
        self.in_utterance = False

    def feed(self, audio: np.ndarray) -> None:
        self.fed.append(audio)
        self.in_utterance = True


class _NoVad:
    sample_rate = 16000
    window_ms = 32.0
    audio_ms = 0.0


def test_the_recent_audio_keeps_every_sample_the_asr_hears_in_order_across_many_seconds() -> None:
    """Manual turns: every sample goes to the ASR. 30 s of a numbered stream in 40 ms chunks (the
    recent-audio buffer is replaced several times) reaches it once, in order, and the slices it got
    are never written again; the buffer keeps about ``_KEEP_MS`` of audio, not the whole stream."""
    from omnivox.voice.listener import _KEEP_MS

    asr = _KeepingAsr()
    listener = Listener(_NoVad(), asr, None, confirm_ms=150)  # type: ignore[arg-type]
    stream = np.arange(30 * 16000, dtype=np.float32)
    for i in range(0, len(stream), 640):
        listener.feed(stream[i : i + 640])
        # (the ASR has heard it all: the recent audio is the last _KEEP_MS)
        assert len(listener._ring) <= _KEEP_MS * 16
        assert listener._ring[-1] == stream[min(i + 640, len(stream)) - 1]
    assert np.array_equal(np.concatenate(asr.fed), stream)
    assert len(listener._buffer) <= 4 * _KEEP_MS * 16


def test_a_short_utterance_over_a_reply_gets_the_backchannel_witness(models, whisper) -> None:
    from omnivox.voice.tts.hibari import HibariTts

    vad, _, _ = models
    said = resample(np.concatenate([c.audio for c in HibariTts(seed=0).synthesize("I see.")]), 24000, 16000)
    audio = np.concatenate([np.zeros(8000, np.float32), said, np.zeros(16000, np.float32)])
    reply = (0.01 * np.sin(np.arange(len(audio)) * 2 * np.pi * 220 / 16000)).astype(np.float32)

    def final(reference: np.ndarray | None) -> object:
        vad.reset(), whisper.reset()
        listener = Listener(vad, whisper, TurnParams(silence_duration_ms=500), confirm_ms=150)
        heard = []
        for i in range(0, len(audio), 640):
            ref = None if reference is None else reference[i : i + 640]
            heard += listener.feed(audio[i : i + 640], ref)
        return [h for h in heard if h.kind in ("pause", "final")]

    scorings = whisper.scorings
    over = final(reply)
    assert [h.kind for h in over] == ["pause", "final"] and over[-1].text
    # said over a reply: the pause's and the final transcript carry the margin, scored once (the
    # same words); heard as said, its own backchannel ("I see.") is as likely as the words
    assert (
        over[0].backchannel_margin is not None and over[-1].backchannel_margin == over[0].backchannel_margin
    )
    assert whisper.scorings == scorings + 1
    assert over[-1].backchannel_margin > -0.5
    # with nothing playing there is nothing to judge it against: no second pass
    alone = final(None)
    assert [h.backchannel_margin for h in alone] == [None, None] and whisper.scorings == scorings + 1
    # nor with the witness off
    vad.reset(), whisper.reset()
    off = Listener(vad, whisper, TurnParams(silence_duration_ms=500), confirm_ms=150, witness=False)
    heard = [h for i in range(0, len(audio), 640) for h in off.feed(audio[i : i + 640], reply[i : i + 640])]
    assert all(h.backchannel_margin is None for h in heard) and whisper.scorings == scorings + 1


# ---- the pause dated where the energy fell (a VAD that holds on after the sound stops, as Silero)


class HangingVad(VoiceActivityDetector):
    """Speech (0.99) while a window is loud and for three windows (96 ms) after the last loud one,
    as Silero's probability stays up after the sound stops; then 0.05."""

    sample_rate = 16000
    window_samples = 512

    def __init__(self) -> None:
        super().__init__()
        self.since_loud = 99

    def _score(self, window: np.ndarray) -> float:
        self.since_loud = 0 if float(np.abs(window).max()) > 0.1 else self.since_loud + 1
        return 0.99 if self.since_loud <= 3 else 0.05

    def _reset_state(self) -> None:
        self.since_loud = 99


def tone(ms: int, amplitude: float = 0.3) -> np.ndarray:
    t = np.arange(ms * 16) / 16000
    return (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def stops(
    audio: np.ndarray, refine: bool, silence_ms: int = 500
) -> tuple[list[float], list[float], RecordingAsr]:
    """Where each turn's speech ended (``audio_end_ms``) and when it was reported (stream ms)."""
    asr = RecordingAsr()
    kwargs = {} if refine else {"end_refinement": None}
    params = TurnParams(silence_duration_ms=silence_ms)
    listener = Listener(HangingVad(), asr, params, confirm_ms=96, **kwargs)
    ends, told = [], []
    for i in range(0, len(audio), 640):
        for h in listener.feed(audio[i : i + 640]):
            if h.kind == "speech_stopped":
                ends.append(h.audio_ms)
                told.append(listener.audio_ms)
    return ends, told, asr


def test_the_pause_starts_where_the_sound_stopped_and_its_silence_is_counted_from_there() -> None:
    audio = np.concatenate([level(200, 0), tone(1000), level(1000, 0)])  # the sound stops at 1200 ms
    vad_ends, vad_told, _ = stops(audio, refine=False)
    ends, told, asr = stops(audio, refine=True)
    assert vad_ends == [1312.0]  # the VAD's: its first quiet window (1312-1344 ms)
    assert len(ends) == 1 and 1200 <= ends[0] <= 1208  # the energy's: where the tone stopped
    assert told[0] - ends[0] >= 500 and told[0] < vad_told[0]  # 500 ms of silence after the real end
    assert told[0] - 1200 <= 500 + 32 + 40  # (a window and a chunk at most after it)
    # the final words' decode began where the energy fell (``decode_after_ms``): the flush names
    # the dated end, which it covers; without that decode the recogniser hears to the VAD's end
    assert asr.flushed == [ends[0]] and asr.ahead[0] < 1312 * 16
    from omnivox.voice.vad.energy import EndRefinement

    asr = RecordingAsr()
    params = TurnParams(silence_duration_ms=500)
    listener = Listener(HangingVad(), asr, params, 96, end_refinement=EndRefinement(decode_after_ms=None))
    heard = hear(listener, audio, frame=640)
    assert next(h for h in heard if h.kind == "speech_stopped").audio_ms == ends[0]
    assert asr.flushed == [1312.0]


def test_a_noisy_room_keeps_the_vads_date() -> None:
    rng = np.random.default_rng(3)
    audio = np.concatenate([level(200, 0), tone(1000), level(1000, 0)])
    audio += (0.02 * rng.standard_normal(len(audio))).astype(np.float32)  # ~20 dB under the tone
    assert stops(audio, refine=True)[0] == stops(audio, refine=False)[0] == [1312.0]


def test_a_gap_inside_the_sentence_that_the_speech_comes_back_from_does_not_end_the_turn() -> None:
    # a 250 ms gap: with its 96 ms the VAD holds on, the pause the VAD sees is 154 ms; dated from
    # the energy it is 250 ms, still under the 300 ms that end the turn
    audio = np.concatenate([level(200, 0), tone(1000), level(250, 0), tone(600), level(1000, 0)])
    ends, _, _ = stops(audio, refine=True, silence_ms=300)
    assert len(ends) == 1 and 2050 <= ends[0] <= 2058  # one turn, ended at the second stop


def test_the_final_words_decode_can_begin_where_the_energy_fell() -> None:
    from omnivox.voice.vad.energy import EndRefinement

    audio = np.concatenate([level(200, 0), tone(1000), level(1000, 0)])  # the sound stops at 1200 ms
    asr = RecordingAsr()
    refine = EndRefinement(decode_after_ms=48)
    listener = Listener(HangingVad(), asr, TurnParams(silence_duration_ms=500), 96, end_refinement=refine)
    heard = hear(listener, audio, frame=640)
    stopped = next(h for h in heard if h.kind == "speech_stopped")
    assert listener.drop_decodes == 1
    # its decode began at the chunk after 48 ms of quiet (1280 ms: the utterance from 0 ms), before
    # the VAD fell (1312 ms, the window heard to 1344); the flush names the dated end it covers
    assert asr.ahead[0] == 1280 * 16 and asr.ahead[0] < 1344 * 16
    assert asr.flushed == [stopped.audio_ms] and 1200 <= stopped.audio_ms <= 1208


def test_a_gap_the_speech_comes_back_from_costs_one_decode_and_does_not_end_the_turn() -> None:
    from omnivox.voice.vad.energy import EndRefinement

    audio = np.concatenate([level(200, 0), tone(1000), level(80, 0), tone(600), level(1000, 0)])
    asr = RecordingAsr()
    refine = EndRefinement(decode_after_ms=48)
    listener = Listener(HangingVad(), asr, TurnParams(silence_duration_ms=500), 96, end_refinement=refine)
    heard = hear(listener, audio, frame=640)
    assert [h.kind for h in heard].count("speech_stopped") == 1
    assert listener.drop_decodes == 2  # the gap's (a partial more) and the end's


def test_a_pause_due_its_flush_and_judgement_at_once_is_judged_while_the_words_decode() -> None:
    from omnivox.voice.turn.base import EndOfTurnModel

    calls: list[str] = []

    class Sure(EndOfTurnModel):
        def probability_finished(self, audio_16k: np.ndarray) -> float:
            calls.append("judged")
            return 0.99

    class Asr(RecordingAsr):
        def flush(self, speech_ms: float | None = None) -> Transcript:
            calls.append("flushed")
            return super().flush(speech_ms)

    audio = np.concatenate([level(200, 0), tone(1000), level(1000, 0)])  # the sound stops at 1200 ms
    # the words flushed at 0.6 of high's shortest pause (120 ms), after the judgement (100 ms) is
    # due: the judgement is made while the words decode, then the flush
    for speculate_at, order in ((0.6, ["judged", "flushed"]), (0.1, ["flushed", "judged"])):
        calls.clear()
        params = TurnParams(eagerness="high")
        listener = Listener(HangingVad(), Asr(), params, 96, speculate_at=speculate_at, end_of_turn=Sure())
        heard = hear(listener, audio, frame=640)
        assert calls[:2] == order
        (score,) = listener.semantic.scores
        assert score.probability == 0.99 and score.tier == "sure" and score.text == "words"
        stopped = next(h for h in heard if h.kind == "speech_stopped")
        kinds = [h.kind for h in heard]
        assert kinds.index("pause") < kinds.index("speech_stopped")
        assert stopped.audio_ms == 1312.0  # semantic_vad's pause keeps the VAD's date


@pytest.mark.parametrize(("probability", "tier"), [(0.99, "sure"), (0.6, "finished"), (0.1, "max_pause")])
def test_semantic_vads_pauses_count_from_the_vads_date_on_every_tier(probability, tier) -> None:
    from omnivox.voice.turn.base import EndOfTurnModel

    class Fixed(EndOfTurnModel):
        def probability_finished(self, audio_16k: np.ndarray) -> float:
            return probability

    audio = np.concatenate([level(200, 0), tone(1000), level(2600, 0)])  # the sound stops at 1200 ms
    told = {}
    for refine in (True, False):
        kwargs = {} if refine else {"end_refinement": None}
        params = TurnParams(eagerness="high")
        listener = Listener(HangingVad(), RecordingAsr(), params, 96, end_of_turn=Fixed(), **kwargs)
        for i in range(0, len(audio), 640):
            if any(h.kind == "speech_stopped" for h in listener.feed(audio[i : i + 640])):
                told[refine] = listener.audio_ms
                break
        assert listener.semantic.scores[0].tier == tier
    # its pauses were set on the VAD's dates (counted from the energy's, the "sure" end cut
    # espeak-ng's paused questions early): as without the refinement
    assert told[True] == told[False]
