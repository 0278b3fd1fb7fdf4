"""Frames from a worker to the gateway on a session's socket, never relayed to clients.

A worker behind a gateway (it connects with ``GATEWAY_HEADER``) interleaves these with the protocol's
own frames; the gateway's relay takes them out of the stream. They are how a worker reports figures
for the gateway's metrics and tells the gateway that a turn is over, whatever the wire protocol.
``type`` is the first key in the JSON, so the relay can tell them apart without parsing every frame.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeGuard

from pydantic import Field, TypeAdapter, ValidationError

from omnivox.protocol.wire import Msg

PREFIX = '{"type":"omnivox.internal.'
GATEWAY_HEADER = "x-omnivox-gateway"  # set by the gateway on its connections to workers


class Metrics(Msg):
    """Figures for the gateway's Prometheus metrics (all optional)."""

    type: Literal["omnivox.internal.metrics"] = "omnivox.internal.metrics"
    error_code: str | None = None  # an error the worker reported to the client
    # turn-based streaming
    cache_hit: bool | None = None  # a turn's first prefill reused the worker's cache (or did not)
    turn_done: bool = False
    ttft_s: float | None = None  # generate -> first chunk
    ttft_cache: Literal["hit", "miss"] | None = None  # the cache the turn had, for the ttft label
    # realtime voice
    voice_to_voice_s: float | None = None  # end of user speech -> first audio delta
    llm_ttft_s: float | None = None
    tts_ttfa_s: float | None = None
    # the turn's breakdown: each stage it passed (``agent.breakdown.STAGES``), in seconds after the
    # end of the user's speech
    stages_s: dict[str, float] | None = None
    interrupted: bool = False
    response_done: bool = False
    # full duplex: one unit
    unit_wall_clock_s: float | None = None  # the unit's chunk arriving -> its result sent
    unit_spoke: bool = False  # the unit spoke (else it listened)
    unit_lagging: bool = False  # the unit heard several chunks merged (the loop fell behind)
    # work since the previous report: time spent hearing (VAD + ASR) / speaking (TTS), and the
    # audio it covered; their ratios are the real-time factors under the load the worker is under
    asr_busy_s: float = 0.0
    asr_audio_s: float = 0.0
    tts_busy_s: float = 0.0
    tts_audio_s: float = 0.0


class TurnEndReport(Msg):
    """A turn of a turn-scoped protocol is over: the gateway may release the worker."""

    type: Literal["omnivox.internal.turn_end"] = "omnivox.internal.turn_end"
    cached_hash: str | None = None  # history hash of what the worker's cache now holds


class PauseReport(Msg):
    """A session-scoped session changed the worker's state (a duplex pause or resume)."""

    type: Literal["omnivox.internal.pause"] = "omnivox.internal.pause"
    paused: bool


Internal = Annotated[Metrics | TurnEndReport | PauseReport, Field(discriminator="type")]
_ADAPTER: TypeAdapter[Internal] = TypeAdapter(Internal)


def is_internal(frame: str | bytes) -> TypeGuard[str]:
    return isinstance(frame, str) and frame.startswith(PREFIX)


def parse_internal(frame: str) -> Metrics | TurnEndReport | PauseReport | None:
    """The internal frame, or None if it is not one this gateway knows (a newer worker's)."""
    try:
        return _ADAPTER.validate_json(frame)
    except ValidationError:
        return None
