"""The echo gate on real speech: hibari's reply comes back through a speakerphone, espeak-ng talks over it.

What matters is what silero VAD makes of the gated input: the echo alone must never hold as speech
(150 ms voiced, the barge-in's confirmation), while a user talking over the reply must.
"""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.audio.resample import resample
from omnivox.voice.echo.choice import build_canceller
from omnivox.voice.echo.gate import EchoGate
from omnivox.voice.echo.webrtc import WebRtcEchoCanceller
from omnivox.voice.vad.silero import SileroVad

RATE = 16000
REPLY = (
    "Once upon a time, a little fox lived by a quiet river. "
    "Every morning she ran through the tall grass to find berries."
)


@pytest.fixture(scope="module")
def reply(hibari_tts) -> np.ndarray:
    audio = np.concatenate([c.audio for c in hibari_tts.synthesize(REPLY)])
    return resample(audio, 24000, RATE)


@pytest.fixture(scope="module")
def vad() -> SileroVad:
    return SileroVad(RATE)


def speakerphone(reply: np.ndarray, delay_ms: float, gain_db: float) -> np.ndarray:
    """What the microphone picks up of ``reply``: later, quieter, with a small room's tail."""
    rng = np.random.default_rng(1)
    tail = rng.standard_normal(int(0.12 * RATE)) * np.exp(-np.arange(int(0.12 * RATE)) / (0.03 * RATE))
    room = np.concatenate([[1.0], tail * np.sqrt(0.1 / np.sum(tail**2))])  # the tail 10 dB under
    delay = int(delay_ms * RATE / 1000)
    echo = np.convolve(np.concatenate([np.zeros(delay), reply]), room)[: len(reply)]
    return (echo * 10 ** (gain_db / 20)).astype(np.float32)


def gate(canceller, near: np.ndarray, ref: np.ndarray, chunk: int = 640) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Through the canceller in 40 ms chunks, as a session hears its microphone."""
    return np.concatenate(
        [canceller.process(near[i : i + chunk], ref[i : i + chunk]) for i in range(0, len(near), chunk)]
    )


def longest_speech_ms(vad: SileroVad, audio: np.ndarray) -> float:
    """The longest run of windows silero takes for speech."""
    vad.reset()
    longest = run = 0.0
    for prob in vad.process(audio):
        run = run + vad.window_ms if prob >= 0.5 else 0.0
        longest = max(longest, run)
    return longest


@pytest.mark.parametrize("gain_db", [-6.0, -10.0, -20.0])
@pytest.mark.parametrize("delay_ms", [30.0, 150.0])
def test_the_replys_echo_alone_is_never_speech(reply, vad, delay_ms, gain_db) -> None:
    echo = speakerphone(reply, delay_ms, gain_db)
    assert longest_speech_ms(vad, echo) >= 500  # ungated, the VAD hears the echo as speech
    out = gate(EchoGate(), echo, reply)
    assert longest_speech_ms(vad, out) < 150  # gated, it never holds long enough to barge in


def test_a_user_talking_over_the_echo_is_heard(reply, vad, espeak) -> None:
    user = espeak("wait, stop. what about tomorrow?")
    at = 2 * RATE
    near = speakerphone(reply, 80, -10)
    near[at : at + len(user)] += user[: len(near) - at]
    out = gate(EchoGate(), near, reply)
    assert longest_speech_ms(vad, out[:at]) < 150  # the echo before it: gated
    heard = out[at : at + len(user)]
    assert longest_speech_ms(vad, heard) >= 300  # the words: heard
    assert np.sum(heard**2) > 0.8 * np.sum(user**2)  # most of the user's voice got through


def test_with_no_echo_coming_back_a_softer_voice_passes_once_the_gate_has_listened(
    reply, vad, espeak
) -> None:
    """Headphones (or a browser's own canceller): nothing comes back, so after a second of the reply
    the gate stops holding the user to the reply's level; a fixed gate would still."""
    user = espeak("what about tomorrow?") * 0.4  # well under the reply's level
    at = 2 * RATE
    near = np.zeros_like(reply)
    near[at : at + len(user)] = user[: len(near) - at]
    learnt = gate(EchoGate(), near, reply)
    fixed = gate(EchoGate(adaptive=False), near, reply)
    assert longest_speech_ms(vad, learnt[at : at + len(user)]) >= 300
    assert np.sum(learnt**2) > 0.95 * np.sum(near**2)
    assert longest_speech_ms(vad, fixed[at : at + len(user)]) < longest_speech_ms(
        vad, learnt[at : at + len(user)]
    )


def test_with_no_reply_playing_the_input_passes_untouched(espeak) -> None:
    user = espeak("hello there")
    canceller = EchoGate()
    assert np.array_equal(gate(canceller, user, np.zeros_like(user), chunk=333), user)
    assert canceller.gated == 0


def test_lengths_must_match() -> None:
    with pytest.raises(ValueError):
        EchoGate().process(np.zeros(10, np.float32), np.zeros(11, np.float32))


def test_a_session_chooses_its_canceller() -> None:
    assert isinstance(build_canceller("gate", 0.5), EchoGate) and build_canceller("gate", 0.5).factor == 0.5
    assert isinstance(build_canceller("aec3"), WebRtcEchoCanceller)
    assert build_canceller("none") is None


def test_an_echo_that_starts_later_is_gated_again_within_a_second_or_so(reply, vad) -> None:
    """Headphones first (the gate learns that nothing comes back), then the speaker is switched on."""
    echo = speakerphone(np.concatenate([reply, reply]), 80, -10)
    switched = len(reply)
    echo[:switched] = 0
    out = gate(EchoGate(), echo, np.concatenate([reply, reply]))
    settled = switched + int(1.5 * RATE)
    assert longest_speech_ms(vad, echo[settled:]) >= 500
    assert longest_speech_ms(vad, out[settled:]) < 150


def chunks_off_the_frame(n: int) -> list[int]:
    """Chunk lengths as a phone line's input comes out of its resamplers: around 40 ms, seldom on a
    20 ms frame's edge, so the gate sees pieces of a few samples at frame edges."""
    sizes = [638, 2, 626, 14, 600, 40, 586, 54, 634, 6]
    out: list[int] = []
    while sum(out) < n:
        out += sizes
    return out


def gate_in(canceller, near: np.ndarray, ref: np.ndarray, sizes: list[int]) -> np.ndarray:  # type: ignore[no-untyped-def]
    pieces, at = [], 0
    for size in sizes:
        if at >= len(near):
            break
        pieces.append(canceller.process(near[at : at + size], ref[at : at + size]))
        at += size
    return np.concatenate(pieces)


def test_a_piece_of_a_few_samples_does_not_open_the_gate_to_the_echo(reply) -> None:
    # a frame's last few samples judged alone measure one sample's peak, not a level: at -6 dB the
    # echo's 2-sample piece passed as louder than the reply and held the gate open for 200 ms
    echo = speakerphone(reply, 150.0, -6.0)
    whole = EchoGate(adaptive=False)
    gate(whole, echo, reply)
    pieces = EchoGate(adaptive=False)
    gate_in(pieces, echo, reply, chunks_off_the_frame(len(echo)))
    # the echo passes no more for being cut into pieces (within a few frames' worth)
    assert (len(echo) - pieces.gated) <= (len(echo) - whole.gated) + 4 * 320
