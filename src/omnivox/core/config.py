"""One settings model for every process: flags > OMNIVOX_* environment > config file > defaults.

The settings are split by process role (the gateway's socket, its pool and queue, a worker's own
address, the engine, the voice models, realtime and duplex sessions, what every process shares),
composed into the one ``Settings`` users configure.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

MiB = 1024 * 1024
R = TypeVar("R", bound=BaseModel)

# what a realtime session hears its microphone through, against the assistant's own echo
# (voice.echo): an energy gate (default), WebRTC's AEC3, or nothing
EchoKind = Literal["none", "gate", "aec3"]
# acknowledgements that do not interrupt the assistant (the sessions' default; agent.interruption)
BACKCHANNELS = (
    "mhm",
    "mm",
    "mmm",
    "hmm",
    "mm hmm",
    "uh huh",
    "uh",
    "um",
    "ah",
    "oh",
    "yeah",
    "yes",
    "yep",
    "yup",
    "ok",
    "okay",
    "right",
    "sure",
    "i see",
    "got it",
    "alright",
    "all right",
)


class ServerSettings(BaseModel):
    """The gateway's listening socket, its keys and what it lets in."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    public: bool = Field(
        False, description="listen beyond loopback without any key (otherwise refused at startup)"
    )
    api_key: str | None = Field(None, description="one key for every role (client, admin, worker)")
    client_key: str | None = Field(None, description="sessions (WebSockets); default: api_key")
    admin_key: str | None = Field(
        None, description="admin API (workers, queue, sessions, recordings); default: api_key"
    )
    metrics_need_admin: bool | None = Field(
        None, description="GET /metrics needs the admin key (default: whenever an admin key is set)"
    )
    public_api_docs: bool | None = Field(
        None,
        description="/docs, /redoc and /openapi.json open to all (default: only while no key is set; "
        "with keys, /openapi.json needs the admin key and the doc pages are off)",
    )
    ws_compression: bool = Field(
        False,
        description="per-message deflate on client WebSockets (smaller frames, but about 49 KiB of "
        "zlib state per open socket)",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="browser origins besides the gateway's own that may open sessions and post forms",
    )


class GatewaySettings(BaseModel):
    """The gateway's pool, queue, health checks and admission, and its HTTP assets."""

    workers: int = Field(1, ge=0, le=64, description="local worker processes `omnivox serve` starts")
    worker_urls: list[str] = Field(default_factory=list, description="workers the gateway knows up front")
    max_queue_size: int = Field(1000, ge=0)
    queue_update_interval_s: float = Field(3.0, gt=0)
    resume_grace_s: float = Field(
        10.0,
        ge=0,
        le=600,
        description="a waiting client whose connection dropped (or whose gateway died) may connect "
        "again with its resume token this long and keep its place in the queue (0: off)",
    )
    health_interval_s: float = Field(2.0, gt=0)
    health_timeout_s: float = Field(2.0, gt=0)
    offline_after_failures: int = Field(2, ge=1)
    heartbeat_interval_s: float = Field(2.0, gt=0, description="how often workers re-register")
    eta_ema_alpha: float = Field(0.3, gt=0, le=1)
    eta_min_samples: int = Field(3, ge=1)
    worker_connect_timeout_s: float = Field(5.0, gt=0)
    streaming_max_wait_s: float = Field(
        300.0, gt=0, description="how long a streaming turn may wait for a worker (then a refusal)"
    )
    max_workers: int = Field(64, ge=1, description="workers the gateway accepts (registrations beyond: 503)")
    forget_offline_after_s: float = Field(
        300.0, gt=0, description="a worker offline this long is removed from the pool"
    )
    max_sessions_per_client: int = Field(
        64, ge=0, description="connections one client address may hold at once (0: no limit)"
    )
    client_connect_rate: float = Field(
        20.0, ge=0, description="new connections per second one client address may open (0: no limit)"
    )
    client_connect_burst: int = Field(100, ge=1, description="connections a client may open at once")
    session_idle_limit_s: float = Field(
        300.0,
        gt=0,
        description="a session holding a worker that hears nothing from its client this long "
        "is closed (idle_timeout; a paused duplex session is not idle)",
    )
    worker_ping_interval_s: float = Field(
        2.0, gt=0, description="keepalive pings on gateway-worker connections (a hung worker is lost)"
    )
    worker_ping_timeout_s: float = Field(3.0, gt=0)
    realtime_max_wait_s: float = Field(
        20.0,
        ge=0,
        description="how long a realtime session may wait for a worker before session_limit_reached",
    )
    realtime_queued_bytes: int = Field(
        4 * MiB, ge=0, description="client events held while a realtime session waits (more are dropped)"
    )
    duplex_queued_bytes: int = Field(
        4 * MiB, ge=0, description="client messages held while a duplex session waits (more are dropped)"
    )
    queued_bytes_total: int = Field(
        256 * MiB, ge=0, description="all waiting sessions' held messages together (more are dropped)"
    )
    # reference audio uploads (POST /api/assets/ref_audio)
    client_secret_max_s: int = Field(
        7200, ge=10, description="longest life of an ephemeral client key (POST /v1/realtime/client_secrets)"
    )
    client_secrets_max: int = Field(10000, ge=1, description="ephemeral keys outstanding at once (more: 429)")
    client_secrets_per_client: int = Field(
        1000, ge=1, description="ephemeral keys one client address may hold outstanding (more: 429)"
    )
    client_secret_session_bytes: int = Field(
        64 * 1024, ge=1024, description="largest session a key is minted with (JSON bytes; more: 413)"
    )
    webrtc_connect_timeout_s: float = Field(
        15.0, gt=0, description="a WebRTC call whose media never connects is ended (and its worker freed)"
    )
    webrtc_max_calls: int = Field(64, ge=0, description="WebRTC calls the gateway holds at once (0: none)")
    webrtc_host_addresses: list[str] = Field(
        default_factory=list,
        description="the only addresses a call offers and accepts as ICE host candidates (empty: every "
        "interface but loopback); 127.0.0.1 keeps calls on one machine (tests, benchmarks)",
    )
    ref_audio_max_bytes: int = Field(10 * MiB, ge=1024, description="largest upload accepted (413 above)")
    # what all clips may take (more: 429 quota_exceeded), per client key (or address) and in total
    ref_audio_max_clips: int = Field(1000, ge=0, description="clips stored at once, in total")
    ref_audio_max_total_mb: int = Field(1024, ge=0, description="MiB all stored clips may take")
    ref_audio_max_clips_per_client: int = Field(100, ge=0, description="clips one client may store")
    ref_audio_max_mb_per_client: int = Field(200, ge=0, description="MiB one client's clips may take")
    ref_audio_min_free_mb: int = Field(
        256, ge=0, description="uploads are refused (507) when the disk has less free space than this"
    )
    http_body_max_bytes: int = Field(
        1 * MiB,
        ge=1024,
        description="largest JSON or form body a route reads (client secrets, call "
        "control, webhooks; 413 above, refused before it is read)",
    )
    ref_audio_min_s: float = Field(1.0, ge=0, description="shortest clip accepted")
    ref_audio_max_s: float = Field(30.0, gt=0, description="longest clip accepted")
    # past one gateway (omnivox[redis]): gateways sharing a store share one queue, workers and keys
    store_url: str = Field(
        "memory",
        description="the scheduler store: memory (this process, the default) or redis://, rediss://, "
        "unix://, redis+sentinel://host:26379/service (gateways sharing it share one queue)",
    )
    store_prefix: str = Field("{ovx}", description="key prefix in the store (its {hash tag}: one slot)")
    gateway_lease_s: float = Field(
        3.0, gt=0, description="a gateway that stops renewing its lease this long is reaped by the others"
    )
    advertise_url: str | None = Field(
        None, description="how other gateways reach this one (sidebands of its calls, its sessions)"
    )
    media_secret: str | None = Field(
        None,
        description="signs recordings' media links; gateways sharing a store share one (default: kept "
        "in the store, or random per process)",
    )


class PhoneProfile(BaseModel):
    """The agent a phone call gets when no webhook decides (by the dialled number, or ``default``)."""

    instructions: str | None = None
    voice: str | None = None
    tools: list[dict[str, Any]] = Field(
        default_factory=list, description="function tools, as in session.update"
    )
    turn_detection: dict[str, Any] | None = None
    greeting: str | None = Field(
        None, description="the agent speaks first: what its first reply is told to say (None: it waits)"
    )
    end_call: bool = Field(True, description="offer the built-in end_call tool (the model may hang up)")
    send_dtmf: bool = Field(
        False, description="on SIP calls, offer the built-in send_dtmf tool (the model may press keys)"
    )
    idle_timeout_s: float = Field(60.0, gt=0, description="hang up after this long with nobody speaking")


class TelephonySettings(BaseModel):
    """Phone calls: SIP (``--sip-port``) and carrier media streams (Twilio, Telnyx, Plivo)."""

    sip_port: int | None = Field(
        None, ge=1, le=65535, description="listen for SIP on this port, UDP and TCP (off)"
    )
    sip_host: str | None = Field(
        None, description="address SIP and RTP listen on (default: the gateway's host; loopback without keys)"
    )
    sip_advertise: str | None = Field(
        None, description="the address put in SDP and Contact (default: sip_host)"
    )
    sip_tls_port: int | None = Field(
        None, ge=1, le=65535, description="SIP over TLS on this port (needs a cert)"
    )
    sip_tls_cert: str | None = Field(None, description="PEM certificate chain for SIP over TLS")
    sip_tls_key: str | None = Field(None, description="PEM private key for SIP over TLS")
    sip_max_calls: int = Field(16, ge=0, description="SIP calls at once (more: 486 Busy Here)")
    sip_invite_rate: float = Field(
        5.0, ge=0, description="INVITEs per second one source may send (0: no limit)"
    )
    sip_invite_burst: int = Field(10, ge=1)
    sip_realm: str = "omnivox"
    sip_users: dict[str, str] = Field(
        default_factory=dict, description="digest credentials trunks authenticate with (user -> password)"
    )
    sip_allow: list[str] = Field(
        default_factory=list, description="source addresses or networks (CIDR) whose calls need no digest"
    )
    sip_webhook_url: str | None = Field(
        None, description="POSTed realtime.call.incoming for each call (then accept/reject/refer)"
    )
    sip_webhook_secret: str | None = Field(
        None, description="Standard Webhooks secret that signs the webhook"
    )
    sip_answer_timeout_s: float = Field(
        30.0, gt=0, description="a ringing call nobody accepts is refused (480)"
    )
    sip_trunk: str | None = Field(None, description="where outbound calls go: a SIP URI (sip:host[:port])")
    sip_trunk_user: str | None = None
    sip_trunk_password: str | None = None
    sip_dial_timeout_s: float = Field(30.0, gt=0, description="an outbound call not answered by then fails")
    rtp_port_min: int = Field(20000, ge=1024, le=65534)
    rtp_port_max: int = Field(20999, ge=1025, le=65535)
    phone_profiles: dict[str, PhoneProfile] = Field(
        default_factory=lambda: {"default": PhoneProfile()},
        description="agent profiles by dialled number (To user), and `default`",
    )
    phone_max_streams: int = Field(64, ge=0, description="carrier media streams at once")
    twilio_auth_token: str | None = Field(
        None,
        description="with it, Twilio's webhook and stream requests must carry a valid X-Twilio-Signature",
    )
    public_url: str | None = Field(
        None, description="the gateway's URL as carriers reach it (https://...): stream URLs and signatures"
    )
    telnyx_public_key: str | None = Field(
        None,
        description="with it (base64 Ed25519, from the Telnyx portal), Telnyx stream requests must carry a "
        "valid telnyx-signature-ed25519",
    )
    plivo_auth_token: str | None = Field(
        None, description="with it, Plivo stream requests must carry a valid X-Plivo-Signature-V3"
    )


class RecordingSettings(BaseModel):
    """Session recording and its retention, as the gateway runs them (under ``data_dir/sessions``)."""

    record_sessions: bool | None = Field(
        None,
        description="record every session (a session may opt out); default: on for `omnivox serve`, "
        "off for `omnivox gateway`",
    )
    record_allow_opt_out: bool = Field(
        True, description="a session may ask not to be recorded (record: false); off: the server decides"
    )
    record_allow_opt_in: bool = Field(
        False, description="a session may ask to be recorded (record: true) when recording is off"
    )
    record_client_address: bool = Field(False, description="keep the client's IP address in meta.json")
    record_queue_bytes: int = Field(
        64 * MiB, ge=MiB, description="frames waiting to be written, all sessions together (more: dropped)"
    )
    record_min_free_mb: int = Field(
        512, ge=0, description="a session is not recorded when the disk has less free space than this"
    )
    retention_days: float | None = Field(
        30.0, ge=0, description="recordings older than this are removed by cleanup (None: kept)"
    )
    max_storage_gb: float | None = Field(
        20.0, ge=0, description="cleanup removes the least recently used recordings above this (None: no cap)"
    )
    cleanup_interval_s: float = Field(86400.0, gt=0, description="how often the gateway runs cleanup")


class WorkerSettings(BaseModel):
    """One worker process's own address and its gateway (each worker's command line sets them)."""

    worker_host: str = "127.0.0.1"
    worker_port: int = Field(0, ge=0, le=65535, description="0 picks a free port")
    worker_public_url: str | None = Field(None, description="URL the gateway uses to reach this worker")
    gateway_url: str | None = Field(None, description="gateway a worker registers with")
    seats: int = Field(
        1,
        ge=1,
        le=64,  # (protocol.control.workers.MAX_SEATS)
        description="sessions one worker process hosts at once: each seat is a worker to the gateway, "
        "at /seats/N of the process's URL (engines pipeline and echo; 1: the process is one worker)",
    )
    dependency_check_s: float = Field(
        30.0, gt=0, description="how often a worker checks the LLM/ASR/TTS servers it uses (--llm-url, ...)"
    )


class EngineSettings(BaseModel):
    """The engine a worker hosts."""

    engine: str = Field(
        "cascade",
        description="cascade (voice: VAD+ASR+LLM+TTS), pipeline (the cascade on shared pipeline stages), "
        "echo, tiny, transformers, minicpmo",
    )
    model: str | None = Field(None, description="model directory for the transformers and minicpmo engines")
    device: str = "cpu"
    minicpmo_ref_audio: str | None = Field(
        None, description="WAV of the minicpmo engine's default voice (clients may send their own)"
    )
    tiny_seed: int = 0
    echo_delay_s: float = Field(
        0.0, ge=0, description="seconds per word the echo engine waits (imitates a model)"
    )


class VoiceSettings(BaseModel):
    """The cascade's voice models, loaded once per worker process."""

    llm: Literal["auto", "local", "echo", "openai", "transformers", "tiny"] = Field(
        "auto",
        description="auto: openai when llm_url is set, else local (SmolLM2-135M-Instruct on llama.cpp); "
        "echo says the user's words back; transformers uses --model",
    )
    llm_url: str | None = Field(None, description="OpenAI-compatible chat server (vLLM, SGLang, ...)")
    llm_model: str | None = Field(None, description="model name on the server (default: the only one)")
    llm_api_key: str | None = None
    llm_context_tokens: int | None = Field(
        None, ge=256, description="history is trimmed to fit this (default 8192; 2048 for the local model)"
    )
    llm_max_tokens: int | None = Field(
        None, ge=1, description="longest reply (default 512; 80 for the local model, which rambles)"
    )
    llm_threads: int = Field(1, ge=1, description="threads of the local LLM (one worker per core: 1)")
    llm_max_sentences: int = Field(
        2, ge=0, description="the local LLM's reply ends after this many sentences (0: no limit)"
    )
    llm_temperature_first: float = Field(0.7, ge=0, le=2)
    llm_temperature_later: float = Field(0.3, ge=0, le=2)
    system_prompt: str = Field(
        "You are a helpful voice assistant. Answer in one or two short spoken sentences, without markdown.",
        description="instructions when the client gives none",
    )
    asr: Literal["whisper", "pocketsphinx", "openai"] = Field(
        "whisper", description="whisper (tiny.en, embedded), pocketsphinx (embedded, streaming) or openai"
    )
    asr_threads: int = Field(1, ge=1, description="threads of the embedded Whisper model")
    asr_partial_ms: int = Field(
        1000,
        ge=0,
        description="Whisper's live partial transcripts: least new audio between two re-transcriptions "
        "of the utterance so far (0: final transcripts only)",
    )
    asr_url: str | None = Field(None, description="OpenAI-compatible /v1/audio/transcriptions server")
    asr_model: str = "whisper-1"
    asr_api_key: str | None = None
    tts: Literal["hibari", "openai"] = "hibari"
    tts_url: str | None = Field(None, description="OpenAI-compatible /v1/audio/speech server")
    tts_model: str = "tts-1"
    tts_api_key: str | None = None
    voice: str | None = Field(None, description="default voice (default: the TTS backend's own)")
    tts_threads: int = Field(1, ge=1, description="threads per TTS model (one worker per core: 1)")


class RealtimeSettings(BaseModel):
    """Realtime voice sessions, as a worker runs them."""

    barge_in_min_ms: int = Field(
        150, ge=0, le=2000, description="voiced audio needed before user speech interrupts the assistant"
    )
    audio_lead_ms: int = Field(
        300, ge=40, le=5000, description="how far ahead of real time reply audio is sent to the client"
    )
    # conversation quality: each session's defaults (session.update's "omnivox" object changes them)
    echo_guard: bool = Field(True, description="the assistant's own words heard back do not interrupt it")
    echo_canceller: EchoKind = Field(
        "gate",
        description="the input against the assistant's echo: gate (input quieter than echo_gate_factor "
        "of the reply playing is silenced), aec3 (WebRTC's echo canceller), none",
    )
    echo_gate_factor: float = Field(
        0.7,
        gt=0,
        le=4,
        description="the gate: input under this share of the reply's recent loudest level is echo (at "
        "most: the gate lowers it to what the echo is heard to be)",
    )
    false_interruption_ms: int = Field(
        1500,
        ge=0,
        le=10000,
        description="speech over the reply pauses it; with no words heard in this long it resumes "
        "(0: speech over the reply cancels it at once)",
    )
    backchannel_max_ms: int = Field(
        1500,
        ge=0,
        le=5000,
        description="utterances up to this long made only of backchannels do not interrupt",
    )
    backchannels: str = Field(
        ",".join(BACKCHANNELS),
        description="acknowledgements that do not interrupt the assistant (comma-separated)",
    )
    failure_apology: str = Field(
        "Sorry, I can't answer right now. Please try again in a moment.",
        max_length=500,
        description="what a caller hears when a reply cannot be made (the LLM server is down or fails "
        "before its first word); empty: nothing is said and the response fails",
    )
    # MCP tools (session.tools[] of type "mcp"): the worker is the MCP client
    mcp_allow_private: bool = Field(
        False,
        description="MCP server URLs may name loopback and private addresses (off: such a URL is "
        "refused, or a session could reach the worker's own network)",
    )
    mcp_timeout_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="the longest an MCP server may take to list its tools or answer a call",
    )


class DuplexSettings(BaseModel):
    """Full-duplex sessions, as a worker runs them."""

    duplex_pause_timeout_s: float = Field(
        60.0, gt=0, description="a paused duplex session is released after this (pause.timeout overrides)"
    )
    duplex_max_pause_s: float = Field(600.0, gt=0, description="the longest pause.timeout a client may ask")
    duplex_max_chunk_ms: int = Field(10_000, ge=100, description="longest audio one audio_chunk may carry")
    duplex_max_lag_ms: int = Field(
        5_000, ge=100, description="audio waiting for the unit loop beyond this is dropped (oldest first)"
    )
    duplex_max_frames: int = Field(4, ge=1, le=64, description="video frames one unit may carry (omni)")
    max_image_pixels: int = Field(
        4096 * 4096, ge=64 * 64, description="largest image (width x height) a message may carry"
    )


class PipelineSettings(BaseModel):
    """The staged pipeline (omnivox.pipeline): its spec, where its coordinator is, its timings."""

    pipeline: str | None = Field(
        None,
        description="a pipeline spec (cascade, fanin, noop, or a TOML path): `serve` starts its "
        "coordinator and local stages, and its workers use the `pipeline` engine",
    )
    coordinator: str | None = Field(
        None, description="the pipeline coordinator (tcp://HOST:PORT) that stages and pipeline workers use"
    )
    coordinator_port: int = Field(0, ge=0, le=65535, description="the coordinator's port (0: a free one)")
    stage_host: str = Field("127.0.0.1", description="address the coordinator and stages listen on")
    stage_port: int = Field(0, ge=0, le=65535, description="a stage's port (0: a free one)")
    stage_advertise: str | None = Field(None, description="the host name other machines reach a stage by")
    pipeline_heartbeat_s: float = Field(0.2, gt=0, description="stage and client heartbeats")
    pipeline_lost_after_s: float = Field(
        3.0,
        gt=0,
        description="a stage silent this long (hung) is lost: its requests fail with stage_lost; a stage "
        "that dies is lost as soon as its connection closes",
    )
    relay_max_payload_bytes: int = Field(64 * MiB, ge=1024, description="largest payload between stages")
    relay_capacity_bytes: int = Field(
        256 * MiB, ge=MiB, description="unread shared memory one process may hold (more: relay_full)"
    )
    relay_shared_memory: bool = Field(
        True, description="pass arrays between processes of one host through shared memory (else frames)"
    )
    pipeline_max_connections: int = Field(
        128, ge=8, description="connections one coordinator or stage port holds (more are closed at once)"
    )
    pipeline_hello_within_s: float = Field(
        5.0,
        gt=0,
        description="a connection to the coordinator that has said nothing by then is closed; "
        "a TCP connection that has not finished ZeroMQ's handshake by then too, on every pipeline port",
    )


class CommonSettings(BaseModel):
    """What every process needs: protocol limits, storage, logging, the worker key."""

    worker_key: str | None = Field(
        None,
        description="registration, heartbeats and gateway-worker connections; default: api_key "
        "(`omnivox serve` makes one for its own workers)",
    )

    max_message_bytes: int = Field(8 * MiB, ge=1024)
    slow_client_timeout_s: float = Field(
        10.0, gt=0, description="a peer that reads nothing for this long is disconnected (1008)"
    )
    max_outbox_bytes: int = Field(
        32 * MiB, ge=MiB, description="unsent bytes held for one peer before it is disconnected (1008)"
    )
    max_new_tokens_limit: int = Field(4096, ge=1)
    data_dir: Path = Path("data")
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = Field(
        "text", description="json: one object a line with session_id, trace_id and span_id"
    )
    otlp_endpoint: str | None = Field(
        None, description="OpenTelemetry traces go there (OTLP); else OTEL_EXPORTER_OTLP_ENDPOINT; else off"
    )


# The roles a process has. `omnivox serve` passes its workers the settings of the roles they share
# with it (not the gateway's own, nor each worker's address, which its command line gives).
WORKER_ROLES: tuple[type[BaseModel], ...] = (
    EngineSettings,
    PipelineSettings,
    VoiceSettings,
    RealtimeSettings,
    DuplexSettings,
    CommonSettings,
)


class Settings(
    CommonSettings,
    PipelineSettings,
    DuplexSettings,
    RealtimeSettings,
    VoiceSettings,
    EngineSettings,
    WorkerSettings,
    RecordingSettings,
    TelephonySettings,
    GatewaySettings,
    ServerSettings,
    BaseSettings,
):
    """Every knob of omnivox: the role sections composed into the one model users configure. Each
    field is also the env var ``OMNIVOX_<NAME>``; components take the section they need."""

    model_config = SettingsConfigDict(env_prefix="OMNIVOX_", extra="ignore")

    @model_validator(mode="after")
    def _ranges_hold(self) -> Settings:
        if self.rtp_port_min >= self.rtp_port_max:
            raise ValueError(
                f"rtp_port_min ({self.rtp_port_min}) must be below rtp_port_max ({self.rtp_port_max})"
            )
        return self

    def key_for(self, role: Literal["client", "admin", "worker"]) -> str | None:
        """The key a role needs (None: the role is open); ``api_key`` covers a role without its own."""
        own = {"client": self.client_key, "admin": self.admin_key, "worker": self.worker_key}[role]
        return own or self.api_key

    @property
    def any_key(self) -> bool:
        return any(self.key_for(role) for role in ("client", "admin", "worker"))

    def role(self, section: type[R]) -> R:
        """This configuration's ``section`` (e.g. ``VoiceSettings``) on its own."""
        return section.model_validate(self.model_dump(include=set(section.model_fields)))


class ConfigError(ValueError):
    """A config file omnivox cannot read as settings (its message names the file)."""


def load_settings(config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Build the settings. ``overrides`` are command line flags (``None`` values are ignored)."""
    path = str(config_file or os.environ.get("OMNIVOX_CONFIG") or "")
    flags = {k: v for k, v in overrides.items() if v is not None}
    if not path:
        return Settings(**flags)
    if not Path(path).is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        with open(path, "rb") as file:
            table = tomllib.load(file)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    # a misspelt setting (or a [table] of them) would otherwise be dropped without a word
    unknown = sorted(set(table) - set(Settings.model_fields))
    if unknown:
        raise ConfigError(f"{path} names settings omnivox does not have: {', '.join(unknown)}")

    class _FileSettings(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=path)

    return Settings.model_validate(_FileSettings(**flags).model_dump())
