"""``bench realtime --floor``: each stage of a turn alone, on this machine, with the same models.

The floor row says how soon a turn could pass each stage if nothing else ran: the same clips heard
by the same listener (VAD, turn detection, Whisper) in the same chunks, each chunk available when
its audio has been "recorded" (real time) and heard at once; then the same prompt to the same LLM
and its first words to the same TTS, one after the other, in this process with no other session.
Its marks are in ms after the end of the speech (the VAD's, as the server's breakdown), in the
breakdown's columns (``bench.breakdown``): a turn answered with a reply prepared in the pause
overlaps the LLM and TTS with the wait, so its measured later stages may come before the floor's.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import numpy as np

from omnivox.agent.breakdown import StageTimes
from omnivox.audio.resample import resample
from omnivox.bench.breakdown import MARKS, TO_CALLER
from omnivox.core.config import Settings
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.listener import Listener
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.reply import FirstToken, ReplyRequest, Spoken, produce_reply
from omnivox.voice.stack import ASR_RATE, VoiceStack, build_voice_stack
from omnivox.voice.vad.turn import TurnParams

CONFIRM_MS = 150.0  # the realtime session's
TAIL_MS = 3000  # silence after a clip: enough for the longest semantic_vad wait


def load_stack(args: argparse.Namespace) -> VoiceStack:
    """The models a cascade worker with the bench's settings loads (local, echo or remote LLM)."""
    llm = "openai" if args.llm_url else args.llm
    return build_voice_stack(Settings(llm=llm, llm_url=args.llm_url, asr=args.asr))


def turn_params(args: argparse.Namespace) -> TurnParams:
    if args.mode == "server_vad":
        return TurnParams(silence_duration_ms=args.silence_ms)
    return TurnParams(eagerness=args.mode)


def hear(
    stack: VoiceStack, clip: np.ndarray, rate: int, params: TurnParams, chunk_ms: int
) -> tuple[StageTimes, str] | None:
    """The hearing's stages of one clip, as if each chunk arrived when recorded and was heard at once
    (times in seconds on the clip's audio clock; None: the listener made no turn of it)."""
    stack.end_session()
    listener: Listener = stack.open_listener(params, CONFIRM_MS)
    audio = np.concatenate([resample(clip, rate, ASR_RATE), np.zeros(ASR_RATE * TAIL_MS // 1000, np.float32)])
    step = ASR_RATE * chunk_ms // 1000
    pause: tuple[float, float] | None = None  # (where it began, noticed at)
    times = StageTimes()
    for start in range(0, len(audio), step):
        chunk = audio[start : start + step]
        arrived = (start + len(chunk)) / ASR_RATE  # on the audio clock: the chunk has been recorded
        began = time.monotonic()
        heard = listener.feed(chunk)
        begun = listener.pause_started_ms
        if begun is not None and (pause is None or pause[0] != begun):
            pause = (begun, arrived + time.monotonic() - began)
        for h in heard:
            at = arrived + h.at - began
            if h.kind == "speech_stopped":
                times.speech_end = h.audio_ms / 1000
                times.decided = at
                times.noticed = pause[1] if pause is not None and pause[0] == h.audio_ms else at
            elif h.kind == "final" and times.decided is not None:
                times.transcribed = at
                return times, h.text
    return None


def reply_floor(stack: VoiceStack, text: str) -> tuple[float, float, float]:
    """(LLM first token, first words, TTS first audio): seconds after the reply to ``text`` began."""
    messages = [ChatMessage(role="user", content=text)]
    if stack.system_prompt:
        messages.insert(0, ChatMessage(role="system", content=stack.system_prompt))
    params = LlmParams(temperature=stack.temperature.first, max_tokens=stack.max_reply_tokens)
    stop = threading.Event()
    began = time.monotonic()
    first_token = float("nan")
    try:
        for piece in produce_reply(stack.llm, stack.tts, ReplyRequest(messages, params), stop):
            if isinstance(piece, FirstToken):
                first_token = piece.after_s
            elif isinstance(piece, Spoken):
                audio_at = time.monotonic() - began
                return first_token, audio_at - piece.synth_s, audio_at
    finally:
        stop.set()
    return first_token, float("nan"), float("nan")


def measure_floor(
    stack: VoiceStack, clips: list[tuple[np.ndarray, float]], rate: int, args: argparse.Namespace
) -> dict[str, float]:
    """The floor's marks (ms after the end of speech), the median over the clips."""
    params = turn_params(args)
    reply_floor(stack, "hello there")  # the first call pays for warming up; the server's did at start
    turns: list[dict[str, float]] = []
    for clip, _ in clips:
        heard = hear(stack, clip, rate, params, args.chunk_ms)
        if heard is None:
            continue
        times, text = heard
        assert times.speech_end is not None and times.transcribed is not None
        ttft, words, audio = reply_floor(stack, text)
        after = times.transcribed - times.speech_end
        marks = {
            "noticed": (times.noticed or times.decided or 0.0) - times.speech_end,
            "decided": (times.decided or 0.0) - times.speech_end,
            "transcribed": after,
            "llm_first_token": after + ttft,
            "first_words": after + words,
            "tts_first_audio": after + audio,
            "first_audio_sent": after + audio,
        }
        marks[TO_CALLER] = marks["first_audio_sent"]
        turns.append({k: v * 1000 for k, v in marks.items()})
    return {m: statistics.median(t[m] for t in turns) for m in MARKS if turns}
