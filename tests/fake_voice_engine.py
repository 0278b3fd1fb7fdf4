"""A fake voice engine for realtime session tests: scripted hearing, scripted replies (no models)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np

from omnivox.engines.base import Engine
from omnivox.protocol.control.workers import Capabilities
from omnivox.voice.listener import Heard
from omnivox.voice.models import VoiceProfile
from omnivox.voice.reply import FirstToken, ReplyPiece, ReplyRequest, Spoken, Word
from omnivox.voice.vad.turn import TurnParams


class ScriptedListener:
    """Each ``feed`` returns the next scripted batch of heard events (none once the script is out)."""

    def __init__(self, script: list[list[Heard]]) -> None:
        self.script = script
        self.samples = 0
        self.pending_samples = 0
        self.configured: list[TurnParams | None] = []
        self.committed_text = "typed by hand"
        self.cleared = 0
        self.background_s = 0.0  # no recogniser threads here
        self.references: list[np.ndarray | None] = []  # the echo reference each feed was given
        self.peeked = ""  # what ``peek`` says was heard so far
        self.pause_started_ms: float | None = None  # the scripted events say when pauses end
        self.witness = True  # whether the backchannel witness would be computed (as ``Listener``)

    @property
    def audio_ms(self) -> float:
        return self.samples / 16

    def feed(self, audio: np.ndarray, reference: np.ndarray | None = None) -> list[Heard]:
        self.references.append(reference)
        self.samples += len(audio)
        self.pending_samples += len(audio)
        return self.script.pop(0) if self.script else []

    def peek(self) -> str:
        return self.peeked

    def commit(self) -> Heard:
        self.pending_samples = 0
        return Heard("final", self.audio_ms, self.committed_text)

    def clear(self) -> None:
        self.pending_samples = 0
        self.cleared += 1

    def configure(self, params: TurnParams | None, witness: bool | None = None) -> None:
        self.configured.append(params)
        if witness is not None:
            self.witness = witness

    def transcribe_clip(self, audio: np.ndarray) -> str:
        return f"clip of {len(audio)} samples"


class FakeVoiceEngine(Engine):
    """Replies ``"Reply to: <last user words>."`` with 100 ms of tone per sentence; with ``hold``
    set, a reply stops after its first audio until told to stop (for barge-ins)."""

    name = "fake-voice"
    capabilities = Capabilities(streaming=False, realtime=True, audio_in=True, audio_out=True)

    def __init__(self, script: list[list[Heard]] | None = None, hold: bool = False) -> None:
        self.listener = ScriptedListener(list(script or []))  # (a test's script may serve several)
        self.hold = hold
        self.asked: list[str] = []  # the last user message of every reply asked for
        self.prefilled: list[str] = []  # the last user message of every prefill
        # what a stateful LLM's keys and values would hold now: the last call's conversation, and
        # the words its reply wrote (a prefill brings it to its conversation: a reply rolled back)
        self.kv: list[tuple[str, str]] = []
        self.stopped = threading.Event()
        self.fail: Exception | None = None  # set: every reply fails before its first word

    @property
    def voice(self) -> FakeVoiceEngine:  # type: ignore[override]
        return self  # its voice models are its own methods

    def prefill(self, request: ReplyRequest) -> None:
        self.prefilled.append(request.messages[-1].text() if request.messages else "")
        self.kv = [(m.role, m.text()) for m in request.messages]

    def profile(self) -> VoiceProfile:
        return VoiceProfile("be brief", ("v1", "v2"), "v1", context_tokens=4096, max_reply_tokens=64)

    def open_listener(
        self, params: TurnParams | None, confirm_ms: float, speculate_at: float | None = 0.3
    ) -> ScriptedListener:
        return self.listener

    def reply(self, request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        last = next((m.text() for m in reversed(request.messages) if m.role == "user"), "")
        self.asked.append(last)
        if self.fail is not None:
            raise self.fail
        yield FirstToken(0.01)
        text = f"Reply to: {last}."
        self.kv = [(m.role, m.text()) for m in request.messages] + [("assistant", text)]
        for word in text.split(" "):
            yield Word(word if word == "Reply" else " " + word)
        if request.speak:
            tone = (0.1 * np.sin(np.arange(2400) / 3)).astype(np.float32)
            yield Spoken(text, tone, 0.001, True)
            if self.hold:
                stop.wait(5)
                self.stopped.set()
                return
            yield Spoken("And more.", tone, 0.001, True)
