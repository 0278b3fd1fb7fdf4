"""Turn-taking: what the session does with what the listener heard.

- Speech starts: ``input_audio_buffer.speech_started`` (the user item's id is fixed here).
- Speech holds (``speech_confirmed``) while the assistant is speaking: barge-in. With
  ``interrupt_response`` the response is cancelled (reason ``turn_detected``), its unsent audio
  dropped and its item truncated to what the user heard.
- Partial transcripts become ``conversation.item.input_audio_transcription.delta``. Deltas only
  append, but a streaming recogniser revises its latest words, so only the words two successive
  partials agree on are sent; the final transcript (``.completed``) settles the rest.
- A pause long enough to predict the end of the turn: the reply is prepared, held (LLM and TTS run,
  nothing is sent); the user speaking again discards it.
- Speech stops: ``speech_stopped``, then the final transcript commits the user item
  (``committed``, ``conversation.item.added``, ``transcription.completed``, ``conversation.item.done``)
  and, with ``create_response``, the reply starts at once: the held one if it answered these very
  words, else a new one. Speech that was only noise (no words) makes no item and no reply.
- Silence after a reply has played (``idle_timeout_ms``): ``input_audio_buffer.timeout_triggered``
  and a reply that prompts the user, as if they had said "...".
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from omnivox.protocol import realtime as rt
from omnivox.protocol.chat import ChatMessage
from omnivox.worker.realtime.conversation import Item, item_id
from omnivox.worker.realtime.listener import Heard

if TYPE_CHECKING:
    from omnivox.worker.realtime.session import RealtimeSession

SILENCE_MARKER = "..."


class TurnTaking:
    def __init__(self, session: RealtimeSession) -> None:
        self.s = session
        self._item_id: str | None = None  # the user item being spoken
        self._stopped_ms = 0.0  # where the last speech ended (audio time)
        self._delta_text = ""  # transcription sent as deltas for the current item
        self._last_partial: list[str] = []

    async def on_heard(self, heard: Heard, arrival: float) -> None:
        """Handle one listener event; ``arrival`` is when the chunk that caused it arrived."""
        s = self.s
        vad = s.config.audio.input.turn_detection
        if heard.kind == "speech_started":
            self._item_id, self._delta_text, self._last_partial = item_id(), "", []
            await s.units.cancel("idle")
            s.outbox.put(rt.SpeechStarted(audio_start_ms=int(heard.audio_ms), item_id=self._item_id))
        elif heard.kind == "speech_confirmed":
            if vad is not None and vad.interrupt_response and s.responses.speaking():
                s.responses.interrupt("turn_detected")
        elif heard.kind == "partial":
            self._partial(heard.text)
        elif heard.kind == "pause":
            if vad is not None and vad.create_response and heard.text.strip() and not s.responses.active:
                await s.responses.speculate(heard.text.strip())
        elif heard.kind == "resumed":
            await s.responses.discard_speculation()
        elif heard.kind == "speech_stopped":
            self._stopped_ms = heard.audio_ms
            s.outbox.put(rt.SpeechStopped(audio_end_ms=int(heard.audio_ms), item_id=self._ensure_item()))
        elif heard.kind == "final":
            # the chunk that ended the turn arrived at ``arrival``; speech ended that much audio earlier
            speech_end_at = arrival - max(0.0, heard.audio_ms - self._stopped_ms) / 1000
            item = self.commit(heard.text)
            if item is None or vad is None or not vad.create_response or s.responses.active:
                await s.responses.discard_speculation()
            elif not await s.responses.confirm(item, speech_end_at):
                await s.responses.create(None, speech_end_at=speech_end_at)

    def commit(self, transcript: str, *, keep_empty: bool = False) -> Item | None:
        """The user's turn as a conversation item (None when nothing was said and ``keep_empty`` is
        off); emits the commit, item and transcription events."""
        s = self.s
        item_id_ = self._ensure_item()
        self._item_id, self._delta_text, self._last_partial = None, "", []
        text = transcript.strip()
        if not text and not keep_empty:
            s.outbox.put(rt.Cleared())  # noise, not a turn
            return None
        item = Item(role="user", audio=True, text=text, id=item_id_)
        previous = s.conversation.add(item)
        s.outbox.put(rt.Committed(item_id=item.id, previous_item_id=previous))
        pending = Item(role="user", audio=True, text="", id=item.id, status="in_progress")
        s.outbox.put(rt.ItemAdded(previous_item_id=previous, item=pending.wire()))
        if s.config.audio.input.transcription is not None:
            s.outbox.put(rt.TranscriptionCompleted(item_id=item.id, transcript=text))
        s.outbox.put(rt.ItemDone(previous_item_id=previous, item=item.wire()))
        return item

    def _ensure_item(self) -> str:
        if self._item_id is None:
            self._item_id = item_id()
        return self._item_id

    def _partial(self, text: str) -> None:
        s = self.s
        words, previous = text.split(), self._last_partial
        self._last_partial = words
        if s.config.audio.input.transcription is None or self._item_id is None:
            return
        agreed: list[str] = []
        for a, b in zip(words, previous, strict=False):
            if a != b:
                break
            agreed.append(a)
        stable = " ".join(agreed)
        if len(stable) <= len(self._delta_text) or not stable.startswith(self._delta_text):
            return  # nothing new is settled, or the recogniser took back words already sent
        delta = stable[len(self._delta_text) :]
        self._delta_text = stable
        s.outbox.put(rt.TranscriptionDelta(item_id=self._item_id, delta=delta))

    # ---- idle timeout

    async def arm_idle(self, playback_left_s: float) -> None:
        """(Re)start the idle timer: it runs from when the reply's audio has finished playing."""
        vad = self.s.config.audio.input.turn_detection
        if vad is None or vad.idle_timeout_ms is None:
            return
        await self.s.units.start("idle", self._idle(playback_left_s + vad.idle_timeout_ms / 1000))

    async def _idle(self, delay_s: float) -> None:
        s = self.s
        start_ms = s.listener_ms()
        await asyncio.sleep(delay_s)
        if s.responses.active or self._item_id is not None:
            return
        end_ms = s.listener_ms()
        s.outbox.put(
            rt.TimeoutTriggered(audio_start_ms=int(start_ms), audio_end_ms=int(end_ms), item_id=item_id())
        )
        prompt = ChatMessage(role="user", content=SILENCE_MARKER)
        await s.responses.create(None, extra=[prompt])
