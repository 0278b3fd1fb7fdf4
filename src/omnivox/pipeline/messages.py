"""The pipeline's control messages: typed structs, MessagePack on the wire, never pickle.

Every message is a ``msgspec.Struct`` with a type tag; ``decode`` accepts only the types listed in
``Message`` and checks every field's type, so a malformed message, an unknown type or a field of the
wrong kind is a ``BadMessage`` (data, never an exception that kills a loop). Payloads travel beside
the header: a ``Payload`` names its values (``meta``, plain MessagePack) and its arrays
(``ArrayRef``: in shared memory on the same host, or in a following ZeroMQ frame; see ``relay``).

Who sends what:

- stage -> coordinator: ``Register`` (also the heartbeat: re-registering is idempotent), ``RequestResult``
  and ``StreamChunk`` for the client (terminal stages), ``Failed``.
- coordinator -> stage: ``RegisterAck``, ``Directory``, ``Submit``, ``StreamChunk`` / ``StreamDone``
  (a client streaming into the entry stage), ``Abort``, ``Shutdown``.
- stage -> stage: ``DataReady`` (a result for the next stage), ``StreamChunk`` / ``StreamDone``.
- client -> coordinator: ``Hello`` (also the heartbeat), ``Submit``, ``StreamChunk``, ``StreamDone``,
  ``Abort``.
- coordinator -> client: ``Welcome``, ``StreamChunk``, ``RequestResult`` (merged terminal results),
  ``Failed``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from omnivox.core.errors import BadPipelineMessage

CLIENT = "client"  # the target name of "back to whoever submitted" in plans
MAX_HEADER_BYTES = 1 << 20  # a control message's own bytes (payload arrays are not counted here)


BadMessage = BadPipelineMessage


class ArrayRef(msgspec.Struct, frozen=True):
    dtype: str  # numpy dtype name, from an allow-list (relay.DTYPES)
    shape: tuple[int, ...]
    nbytes: int
    segment: str | None = None  # shared-memory segment name (same host); None: a ZeroMQ frame
    frame: int = -1  # index of the frame after the header that holds the bytes (segment is None)


class Payload(msgspec.Struct, frozen=True):
    meta: dict[str, Any] = {}  # plain values (str, numbers, lists, dicts)
    arrays: dict[str, ArrayRef] = {}


class Plan(msgspec.Struct, frozen=True):
    """Where a request goes: computed once by the coordinator from the spec, carried by every message
    about the request, so a stage routes it without asking anyone."""

    targets: dict[str, list[str]]  # stage -> stages (or CLIENT) its result goes to
    streams: dict[str, list[str]]  # stage -> stages (or CLIENT) its stream chunks go to
    inputs: dict[str, list[str]]  # stage -> stages whose results it waits for (fan-in); [] at entries
    entries: list[str]  # stages the coordinator submits to
    exits: list[str]  # stages whose results make the request's result
    client_host: str = ""  # the client's relay.host_id(): payloads for it may use shared memory
    traceparent: str = ""  # the coordinator's span of the request (W3C): the stages' spans go under it


class StageInfo(msgspec.Struct, frozen=True):
    name: str
    address: str  # where its PULL socket listens (tcp://host:port)
    host: str  # relay.host_id(): equal hosts may pass payloads through shared memory
    pid: int
    info: dict[str, Any] = {}  # what the stage's model tells clients (voices, slots, ...)


class Register(msgspec.Struct, tag="register", frozen=True):
    stage: StageInfo
    load: dict[str, float] = {}  # queue, running, slots_used, slots_total, batches, batch_items...
    first: bool = False  # the stage process has just started


class RegisterAck(msgspec.Struct, tag="register_ack", frozen=True):
    epoch: str  # the coordinator's boot id: a new one means it restarted
    known: bool  # False: the coordinator did not count this stage as alive (new, or written off)


class Directory(msgspec.Struct, tag="directory", frozen=True):
    epoch: str
    stages: dict[str, StageInfo]


class Hello(msgspec.Struct, tag="hello", frozen=True):
    client: str  # a name for logs
    host: str = ""  # relay.host_id()


class Welcome(msgspec.Struct, tag="welcome", frozen=True):
    epoch: str
    stages: dict[str, StageInfo]
    spec: str  # the pipeline's name


class Submit(msgspec.Struct, tag="submit", frozen=True):
    request_id: str
    payload: Payload = Payload()
    plan: Plan | None = None  # set by the coordinator; a client names entries/exits instead
    entries: list[str] = []  # client: where the request enters (default: the spec's entries)
    exits: list[str] = []  # client: whose results it wants (default: the spec's exits)
    traceparent: str = ""  # client: the span the request belongs to (W3C; "": none)


class DataReady(msgspec.Struct, tag="data_ready", frozen=True):
    request_id: str
    source: str  # the stage that produced it
    plan: Plan
    payload: Payload


class StreamChunk(msgspec.Struct, tag="stream_chunk", frozen=True):
    request_id: str
    source: str  # producing stage, or CLIENT
    payload: Payload
    plan: Plan | None = None
    seq: int = 0


class StreamDone(msgspec.Struct, tag="stream_done", frozen=True):
    request_id: str
    source: str
    plan: Plan | None = None
    payload: Payload = Payload()  # the producer's final result, if it has one


class Abort(msgspec.Struct, tag="abort", frozen=True):
    request_id: str
    reason: str = "aborted"


class Shutdown(msgspec.Struct, tag="shutdown", frozen=True):
    reason: str = ""


class RequestResult(msgspec.Struct, tag="result", frozen=True):
    request_id: str
    source: str  # a stage, or "" for the coordinator's merged result
    payload: Payload = Payload()
    parts: dict[str, Payload] = {}  # coordinator -> client: each exit stage's result


class Failed(msgspec.Struct, tag="error", frozen=True):
    request_id: str
    code: str  # an OmnivoxError code: stage_lost, stage_unavailable, payload_too_large, ...
    message: str
    source: str = ""


Message = (
    Register
    | RegisterAck
    | Directory
    | Hello
    | Welcome
    | Submit
    | DataReady
    | StreamChunk
    | StreamDone
    | Abort
    | Shutdown
    | RequestResult
    | Failed
)

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Message)


def encode(message: Message) -> bytes:
    return _encoder.encode(message)


def decode(data: bytes | memoryview) -> Message:
    """The message in ``data``; ``BadMessage`` for anything else (too big, not one of ours)."""
    if len(data) > MAX_HEADER_BYTES:
        raise BadMessage(f"control message of {len(data)} bytes (limit {MAX_HEADER_BYTES})")
    try:
        return _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadMessage(f"malformed control message: {exc}") from None
