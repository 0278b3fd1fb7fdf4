"""The replies of one session: at most one speaking, at most one held, each a work unit.

- ``create``: a reply now (the adapter's request, the end of a turn, the idle prompt); refused with
  ``ActiveResponse`` while one is speaking.
- ``prefill``: while the user speaks, the LLM computes the prompt of the reply to come up to their
  words so far, on the output thread between replies (``VoiceModels.prefill``; the newest asked
  for wins, and a reply starting skips those not begun), so the reply computes only the rest.
- ``speculate``: prepare the reply to what the user said so far, held during their pause;
  ``confirm`` releases it when the turn ends with the same words (compared as words: case and
  punctuation aside), else it is dropped unheard; ``discard_speculation`` drops it when they go on
  talking (the agent then prefills the words still believed: the LLM's state is rolled back).
- ``pause`` (speech over the assistant, not judged yet) stops the speaking reply's audio, or the
  playback of the last one still playing at the listener; ``resume`` plays it on.
- ``interrupt`` (a barge-in) cancels the speaking reply, or cuts the audio of the last one that is
  still playing at the listener (``ReplyCut``); ``cancel`` and ``truncate`` are the adapter's.
- What the user heard of them is the playout ledger's (``agent.playout``): the speaking reply, or
  the last one heard, holds the floor there. ``heard`` takes the listener's own reports of its
  player (started, stopped) into the ledger: the assistant is talking while a reply runs or its audio
  still plays by the best account there is (the listener's reports where it gives them, else the
  ledger's model), so words after a reply the listener has finished playing are a new turn.

When a reply that was heard ends, ``on_finished`` gets it (the agent reports its figures and arms the
idle timer).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, Future

from omnivox.agent.events import ReplyCut, ReplyEvent, ReplyState
from omnivox.agent.playout import Playback, Playout
from omnivox.agent.reply import Pacing, Produce, Reply, ReplyPlan
from omnivox.connection.units import WorkUnits
from omnivox.core.errors import ActiveResponse, OmnivoxError, ResponseCancelNotActive
from omnivox.voice.reply import ReplyRequest

log = logging.getLogger(__name__)

UNIT = "response"
_WORD = re.compile(r"[\w']+")


def same_words(a: str, b: str) -> bool:
    """Whether two transcripts say the same words (a recogniser's case and punctuation aside: a
    prepared reply to "good morning" answers "Good morning." as well)."""
    return _WORD.findall(a.lower()) == _WORD.findall(b.lower())


class Replies:
    def __init__(
        self,
        *,
        produce: Produce,
        emit: Callable[[ReplyEvent], None],
        playout: Playout,
        units: WorkUnits,
        executor: Executor,
        pacing: Pacing,
        on_finished: Callable[[Reply], Awaitable[None]],
        prefill: Callable[[ReplyRequest], None] = lambda request: None,
        drop_unsent: Callable[[str], float] = lambda reply_id: 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.produce = produce
        self.prefill_model = prefill  # blocking: on the output thread
        self.emit = emit
        self.playout = playout  # what the user heard
        self.units = units
        self.executor = executor
        self.pacing = pacing
        self.on_finished = on_finished
        self.drop_unsent = drop_unsent
        self.clock = clock
        self.active: Reply | None = None  # speaking
        self.held: Reply | None = None  # prepared during the user's pause, not said yet
        self.last: Reply | None = None  # the last one that was heard (its audio may still play)
        self._held_text = ""
        self._paused: Reply | None = None  # paused by speech over it, not judged yet
        self._prefill_asked = 0  # prefills asked for; one runs only while it is the newest

    # ---- what turn-taking needs to know

    def speaking(self) -> bool:
        """Whether the assistant is talking: a reply runs, or its audio is still playing at the
        listener (``Playout.playing``)."""
        return self.active is not None or self.playout.playing()

    def playback_left_s(self) -> float:
        """Seconds of the last finished reply's audio the listener has yet to play."""
        return 0.0 if self.active is not None else self.playout.left_s()

    def spoken_recently(self) -> str:
        """The assistant's words the user may just have heard (the echo guard's)."""
        return self.playout.spoken_recently()

    def heard(self, reply_id: str, started: bool, at: float) -> float | None:
        """The listener reports its player ``started`` reply ``reply_id`` at ``at`` (else: it has
        played all of it). Returns the model's error in ms (``Playout.heard``); None: no reply of
        that id is on the floor, or a ``stopped`` came while it still speaks (only a reply that has
        said everything can have been played to its end)."""
        reply = next((r for r in (self.active, self.last) if r is not None and r.reply_id == reply_id), None)
        if reply is None or (not started and not reply.over):
            return None
        return self.playout.heard(reply.playback, started, at)

    # ---- starting

    async def create(self, plan: Callable[[], ReplyPlan]) -> Reply:
        """Start a reply (``plan`` is made once the one before has said its end, so it sees the
        conversation as that left it); raises ``ActiveResponse`` while one runs."""
        if self.active is not None and self.active.over:  # cut a moment ago: let it finish its events
            await asyncio.wait_for(self.active.ended.wait(), 10)
        if self.active is not None:
            raise ActiveResponse(
                f"response {self.active.reply_id} is in progress; cancel it or wait for response.done"
            )
        await self.discard_speculation()
        reply = self._reply(plan(), held=False)
        self._speak(reply)
        await self.units.start(UNIT, self._run(reply))
        return reply

    def prefill(self, request: Callable[[], ReplyRequest]) -> None:
        """Have the LLM compute the prompt of the reply to come (``request``, planned now, on the
        loop, which owns the conversation) while no reply runs; a newer prefill or a reply makes
        one not begun yet moot. Its failure costs nothing but the time it would have saved."""
        if self.active is not None or self.held is not None:
            return  # the LLM is the reply's
        try:
            planned = request()
        except OmnivoxError as err:  # the reply's own plan will say it, if it is still so then
            log.debug("no prefill: %s", err.message)
            return
        self._prefill_asked += 1
        asked = self._prefill_asked

        def run() -> None:
            if asked == self._prefill_asked:  # nothing newer was asked for meanwhile, no reply began
                self.prefill_model(planned)

        try:
            self.executor.submit(run).add_done_callback(_log_failure)
        except RuntimeError:  # the session is closing: its threads take no more work
            pass

    async def speculate(self, plan: Callable[[], ReplyPlan], user_text: str) -> None:
        """Prepare (and hold) the reply to ``user_text`` while the user's pause runs out."""
        await self.discard_speculation()
        self.held, self._held_text = self._reply(plan(), held=True), user_text
        await self.units.start(UNIT, self._run(self.held))

    async def confirm(self, user_text: str, speech_end_at: float | None) -> bool:
        """The turn ended with ``user_text``: say the held reply if it answers those words (False: it
        did not, and it is dropped unheard)."""
        held, self.held = self.held, None
        if held is None:
            return False
        if not same_words(self._held_text, user_text):
            held.discard()
            await self.units.cancel(UNIT)
            return False
        self._speak(held)
        held.release(speech_end_at)
        return True

    async def discard_speculation(self) -> None:
        held, self.held = self.held, None
        if held is not None:
            held.discard()
            await self.units.cancel(UNIT)

    # ---- stopping

    def cancel(self, reply_id: str | None) -> None:
        """The adapter's cancel: raises ``ResponseCancelNotActive`` if there is nothing to cancel."""
        active = self.active
        if active is None or (reply_id is not None and reply_id != active.reply_id):
            raise ResponseCancelNotActive(
                "no response is in progress" if active is None else f"response {reply_id} is not in progress",
                param="response_id" if reply_id else None,
            )
        active.cancel("client_cancelled")

    def interrupt(self, reason: str) -> None:
        """Barge-in: cancel the running reply, or cut the audio of the last one still playing."""
        self._paused = None
        if self.active is not None:
            self.active.cancel(reason)
        else:
            self.cut_playback()

    def truncate(self, playback: Playback, heard_ms: float) -> bool:
        """The listener heard the reply whose audio is ``playback`` up to ``heard_ms`` (a client's
        truncation). True: it was still being said and stops there now (its ``ReplyEnded`` says
        so); False: it was over, its playback stops there, and what was heard is the adapter's to
        keep."""
        active, last = self.active, self.last
        if active is not None and active.playback is playback and not active.settled:
            active.cancel("client_cancelled", heard_ms)  # its events end with the truncation
            return True
        if last is not None and last.playback is playback:
            playback.stop(heard_ms)  # what still played at the listener is not echo any more
            self.playout.forget(playback)
            self.last = None
        return False

    def cut_playback(self) -> bool:
        """Barge-in after a reply finished but while its audio still plays: keep what was heard
        (``ReplyCut``). False: nothing of it was playing."""
        last = self.last
        if last is None or not last.plan.audio or last.playback.audio_ms <= 0:
            return False  # nothing of it was said (a reply that only called functions has no audio)
        stopped = last.playback.stop()
        self.playout.forget(last.playback)
        self.last = None
        self.emit(ReplyCut(last.reply_id, stopped))
        return True

    def pause(self, at_end: bool = False) -> bool:
        """Speech over the assistant: stop its audio now, undoably (False: nothing was playing;
        ``at_end``: speech as the reply played out, ``Reply.pause``)."""
        target = self.active if self.active is not None else self.last
        if target is None or not target.pause(at_end):
            return False
        self._paused = target
        return True

    def resume(self, reason: str) -> None:
        """The speech was not an interruption (``no_words``, ``backchannel``, ``echo``): play on."""
        paused, self._paused = self._paused, None
        if paused is not None:
            paused.resume(reason)

    async def stop(self) -> None:
        """Wait for the reply unit to stop (the session is ending)."""
        await self.units.cancel(UNIT)

    # ---- internals

    def _speak(self, reply: Reply) -> None:
        """``reply`` speaks: it has the floor, in the ledger too."""
        self.active = reply
        self.playout.hold(reply.playback)

    def _reply(self, plan: ReplyPlan, held: bool) -> Reply:
        self._prefill_asked += 1  # prefills not begun yet are moot: the reply computes its prompt
        return Reply(
            plan,
            self.produce,
            self.emit,
            self.playout.playback(),
            self.executor,
            self.pacing,
            held=held,
            clock=self.clock,
            drop_unsent=self.drop_unsent,
        )

    async def _run(self, reply: Reply) -> None:
        try:
            state = await reply.run()
        finally:
            if self.active is reply:
                self.active = None
        if state is ReplyState.DISCARDED:
            return  # a held reply the user never heard: it leaves no trace
        self.last = reply
        if (error := reply.figures.error) is not None:
            said = "failed" if state is ReplyState.FAILED else "could not be made (apologised)"
            log.warning("response %s %s: %s", reply.reply_id, said, error.message)
        await self.on_finished(reply)


def _log_failure(done: Future[None]) -> None:
    if not done.cancelled() and (error := done.exception()) is not None:
        log.warning("prefill failed (the reply computes its whole prompt): %s", error)
