"""Errors as data: every error omnivox reports has a code, a category and its wire mappings.

This module is the one place that maps errors to error codes, HTTP statuses and WebSocket close
codes. Code never matches on message text; it matches on classes or on ``code``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class Category(StrEnum):
    RECOVERABLE = "recoverable"  # report it, keep the connection
    FATAL = "fatal"  # report it, then close the connection


# WebSocket close codes (RFC 6455 section 7.4.1).
WS_NORMAL = 1000
WS_POLICY = 1008
WS_TOO_BIG = 1009
WS_SERVER_ERROR = 1011


class OmnivoxError(Exception):
    """Base class. Subclasses set ``code``, ``category``, ``http_status`` and ``close_code``."""

    code: ClassVar[str] = "internal_error"
    category: ClassVar[Category] = Category.FATAL
    http_status: ClassVar[int] = 500
    close_code: ClassVar[int] = WS_SERVER_ERROR
    # the OpenAI Realtime API's name for this error, where it has its own (else ``code``)
    realtime_code: ClassVar[str | None] = None

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = {k: v for k, v in details.items() if v is not None}

    @property
    def fatal(self) -> bool:
        return self.category is Category.FATAL

    @property
    def wire_code(self) -> str:
        """The code in OpenAI Realtime ``error`` events."""
        return self.realtime_code or self.code

    def to_payload(self) -> dict[str, Any]:
        """The ``error`` message body sent to clients."""
        payload: dict[str, Any] = {"type": "error", "code": self.code, "message": self.message}
        if self.details:
            payload["details"] = self.details
        return payload


class _Recoverable(OmnivoxError):
    category = Category.RECOVERABLE
    http_status = 400
    close_code = WS_NORMAL


class InvalidJson(_Recoverable):
    realtime_code = "invalid_event"
    code = "invalid_json"


class UnknownMessageType(_Recoverable):
    realtime_code = "invalid_event"
    code = "unknown_type"


class InvalidMessage(_Recoverable):
    realtime_code = "invalid_event"
    code = "invalid_message"
    http_status = 422


class MessageTooLarge(_Recoverable):
    code = "message_too_large"
    http_status = 413


class QuotaExceeded(_Recoverable):
    """A store of the client's things (uploaded clips, ...) is full: its share, or all of it."""

    code = "quota_exceeded"
    http_status = 429


class StorageUnavailable(OmnivoxError):
    """The server could not store something (disk full, not writable); nothing of it was kept."""

    code = "storage_unavailable"
    category = Category.RECOVERABLE
    http_status = 507


class InvalidAudio(_Recoverable):
    code = "invalid_audio"


class UnsupportedContent(_Recoverable):
    code = "unsupported_content"


class PrefillRequired(_Recoverable):
    code = "prefill_required"
    http_status = 409


class GenerationInProgress(_Recoverable):
    code = "generation_in_progress"
    http_status = 409


class NotFound(_Recoverable):
    code = "not_found"
    http_status = 404


class ItemNotFound(NotFound):
    """A realtime event names a conversation item the session does not have."""

    code = "item_not_found"


# The OpenAI Realtime API names a missing item by what the client tried to do with it; stock clients
# wait for these codes (pipecat's ``retrieve_conversation_item`` settles on the first).
class RetrieveItemNotFound(ItemNotFound):
    code = "item_retrieve_invalid_item_id"


class TruncateItemNotFound(ItemNotFound):
    code = "item_truncate_invalid_item_id"


class DeleteItemNotFound(ItemNotFound):
    code = "item_delete_invalid_item_id"


class ItemExists(_Recoverable):
    """``conversation.item.create`` with the id of an item the conversation already has."""

    code = "item_already_exists"
    http_status = 409


class CallNotFound(NotFound):
    """A ``function_call_output`` for a call that was never made."""

    code = "call_not_found"


class RecordingBusy(_Recoverable):
    """A recording whose session still records cannot be removed."""

    code = "recording_in_progress"
    http_status = 409


class InvalidCursor(_Recoverable):
    """A page cursor this server did not give."""

    code = "invalid_cursor"


class InputAudioBufferCommitEmpty(_Recoverable):
    code = "input_audio_buffer_commit_empty"


class ActiveResponse(_Recoverable):
    """A realtime session is asked for a response while one is still running."""

    code = "conversation_already_has_active_response"
    http_status = 409


class ResponseCancelNotActive(_Recoverable):
    code = "response_cancel_not_active"


class InvalidImage(_Recoverable):
    """An image or video frame that is not a PNG or JPEG, cannot be decoded, or is too large."""

    code = "invalid_image"


class PrepareRequired(_Recoverable):
    """A duplex message that needs a prepared session came before ``prepare``."""

    code = "prepare_required"
    http_status = 409


class AlreadyPrepared(_Recoverable):
    code = "already_prepared"
    http_status = 409


class SessionPaused(_Recoverable):
    """Audio sent to a paused duplex session (it is not heard; resume first)."""

    code = "session_paused"
    http_status = 409


class NotPaused(_Recoverable):
    code = "not_paused"
    http_status = 409


class QueuedInputDropped(_Recoverable):
    """A session waiting for a worker sent more than the gateway holds for it; the rest is dropped."""

    code = "queued_input_dropped"


class UnusableSdp(_Recoverable):
    """A phone call's SDP that offers nothing omnivox can carry (no G.711 audio, no address):
    SIP 488 Not Acceptable Here."""

    code = "unusable_sdp"
    http_status = 488


class CallNotRinging(_Recoverable):
    """``accept``, ``reject`` or ``refer`` for a phone call that is not in the state it needs."""

    code = "call_state_conflict"
    http_status = 409


class InvalidSignature(OmnivoxError):
    """A carrier request whose signature (``X-Twilio-Signature``) is missing or wrong."""

    code = "invalid_signature"
    http_status = 403
    close_code = WS_POLICY


class DialFailed(OmnivoxError):
    """An outbound call that was not answered: busy, no answer, rejected, unreachable or timed out
    (``details.sip_status`` is the callee's final answer, where there was one). Not the client's
    fault, and nothing to close: like a lost worker, a recoverable 502."""

    code = "dial_failed"
    category = Category.RECOVERABLE
    http_status = 502


class QueueFull(OmnivoxError):
    code = "queue_full"
    http_status = 503
    close_code = WS_POLICY


class SessionLimitReached(OmnivoxError):
    code = "session_limit_reached"
    http_status = 503
    close_code = WS_POLICY


class Unauthorized(OmnivoxError):
    code = "unauthorized"
    http_status = 401
    close_code = WS_POLICY


class InvalidSessionId(OmnivoxError):
    code = "invalid_session_id"
    http_status = 400
    close_code = WS_POLICY


class InvalidResumeToken(OmnivoxError):
    """A ``resume`` token that no gateway of this store signed (a waiting client's claim on its
    place in the queue; an expired or spent but genuine one just queues the client anew)."""

    code = "invalid_resume_token"
    http_status = 400
    close_code = WS_POLICY


class TooManySessions(OmnivoxError):
    """One client address holds too many connections, or opens them too fast."""

    code = "too_many_sessions"
    http_status = 429
    close_code = WS_POLICY


class SessionIdle(OmnivoxError):
    """A session holding a worker heard nothing from its client for too long."""

    code = "idle_timeout"
    http_status = 408
    close_code = WS_POLICY


class SlowClient(OmnivoxError):
    """A peer that stopped reading what it is sent (its unsent frames piled up)."""

    code = "client_too_slow"
    http_status = 408
    close_code = WS_POLICY


class Interrupted(_Recoverable):
    """Work stopped because its session ended (the client left): nobody is waiting for it."""

    code = "interrupted"


class ContextTooLong(_Recoverable):
    """A prompt longer than the model's context: refused before any compute."""

    code = "context_length_exceeded"
    http_status = 413


class WorkerLost(OmnivoxError):
    """The worker serving a session died. A streaming session can go on (its next turn is routed
    afresh); a duplex or realtime session, whose state lived on that worker, closes."""

    code = "worker_lost"
    category = Category.RECOVERABLE
    http_status = 502


class WorkerUnavailable(OmnivoxError):
    """No worker in the pool can ever serve this task (none has the capability)."""

    code = "no_capable_worker"
    http_status = 503
    close_code = WS_POLICY


class TooManyWorkers(OmnivoxError):
    code = "too_many_workers"
    http_status = 503
    close_code = WS_POLICY


class InvalidWorkerUrl(_Recoverable):
    """A worker registered a URL that is not ``http(s)://host[:port]``."""

    code = "invalid_worker_url"


class UnknownSeat(NotFound):
    """A path under ``/seats/`` of a worker process that names none of its seats."""

    code = "unknown_seat"


class WorkerBusy(OmnivoxError):
    code = "worker_busy"
    http_status = 409
    close_code = WS_POLICY


class StaleAssignment(WorkerBusy):
    """A session older than one the worker has seen (its gateway paused past its lease and the worker
    went to someone else), or a second one for the assignment it serves: refused at once."""

    code = "stale_assignment"


class StoreUnavailable(OmnivoxError):
    """The scheduler store (Redis) cannot be reached: no new session is admitted until it is back
    (sessions already running go on)."""

    code = "service_unavailable"
    http_status = 503
    close_code = WS_POLICY


class GatewayDraining(OmnivoxError):
    """The gateway is stopping (a rolling update): new sessions go to another gateway."""

    code = "gateway_draining"
    http_status = 503
    close_code = WS_POLICY


class EngineFailure(OmnivoxError):
    code = "engine_error"


class IllegalTransition(OmnivoxError):
    """A state machine was asked for a move its table does not allow (a bug, never user input)."""

    code = "illegal_transition"


class InternalError(OmnivoxError):
    code = "internal_error"


def as_omnivox_error(exc: BaseException) -> OmnivoxError:
    """Wrap anything unexpected as an ``InternalError`` so it can be reported like the rest."""
    if isinstance(exc, OmnivoxError):
        return exc
    return InternalError(f"{type(exc).__name__}: {exc}")


class TicketCancelled(OmnivoxError):
    """A queued ticket was cancelled (``DELETE /api/queue/{id}``) before a worker was assigned."""

    code = "ticket_cancelled"
    http_status = 409
    close_code = WS_NORMAL


# ---- the staged pipeline (omnivox.pipeline): errors a request fails with, carried as data in
# ``Failed{code}`` messages and raised on the client side. All leave the session usable: the next
# turn is a new request.


class PipelineError(OmnivoxError):
    """A pipeline request failed (the base of the pipeline's errors, and what a stage's own failure
    is reported as: ``code`` is the stage's error code). Server-side faults the session survives,
    like a lost worker: 502, and close 1011 only if a protocol decides to close."""

    code = "pipeline_error"
    category = Category.RECOVERABLE
    http_status = 502
    close_code = WS_SERVER_ERROR


class StageLost(PipelineError):
    """A stage serving the request died or stopped heartbeating (or the coordinator restarted)."""

    code = "stage_lost"


class StageUnavailable(PipelineError):
    """A stage the request needs is not registered (and did not come back in time)."""

    code = "stage_unavailable"


class PayloadTooLarge(PipelineError):
    """A payload over the relay's size limit: refused before any copy."""

    code = "payload_too_large"


class RelayFull(PipelineError):
    """The relay holds its limit of unread payloads (or the next hop's queue is full)."""

    code = "relay_full"


class PayloadLost(PipelineError):
    """A payload disappeared before it was read (its producer died and its memory was freed)."""

    code = "payload_lost"


class BadPipelineMessage(PipelineError):
    """A control message that does not decode: not MessagePack, an unknown type, a wrong field."""

    code = "bad_message"


PIPELINE_ERRORS: dict[str, type[PipelineError]] = {PipelineError.code: PipelineError} | {
    cls.code: cls for cls in PipelineError.__subclasses__()
}


def pipeline_error(code: str, message: str) -> OmnivoxError:
    """The error a ``Failed{code}`` stands for (a stage's own error codes keep their code)."""
    cls = PIPELINE_ERRORS.get(code)
    if cls is not None:
        return cls(message)
    err = PipelineError(message)
    err.code = code  # type: ignore[misc]  # the stage's code, as data (e.g. engine_error)
    return err
