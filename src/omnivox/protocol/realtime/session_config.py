"""Realtime session configuration: the effective settings, and ``session.update`` as a partial patch.

``session.update`` changes only the fields it names; ``null`` turns a feature off (turn detection,
transcription). Both the GA nested form (``audio.input.turn_detection``) and the flat beta fields
(``turn_detection``, ``input_audio_format: "pcm16"``, ``voice``, ``modalities``...) are accepted; the
effective configuration is always reported in the GA form (``session.created`` / ``session.updated``).

Audio formats: ``audio/pcm`` (PCM16 mono, 24 kHz; other rates from 8 to 48 kHz as an omnivox
extension), ``audio/pcmu`` and ``audio/pcma`` (G.711 at 8 kHz), and ``audio/opus`` (Ogg-Opus at 24 kHz,
an omnivox extension; Unmute's wire format).

``omnivox`` (an extension object, defaults from the worker's settings) holds the conversation-quality
settings: ``echo_guard``, ``echo_canceller`` (``gate``, ``aec3``, ``none``), ``echo_gate_factor``,
``false_interruption_ms``, ``backchannels`` and ``backchannel_max_ms``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from omnivox.core.config import BACKCHANNELS, EchoKind
from omnivox.core.errors import InvalidMessage
from omnivox.core.ids import new_id
from omnivox.protocol.wire import error_path

PCM_RATES = (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000)
BETA_FORMATS: dict[str, dict[str, Any]] = {
    "pcm16": {"type": "audio/pcm", "rate": 24000},
    "g711_ulaw": {"type": "audio/pcmu"},
    "g711_alaw": {"type": "audio/pcma"},
    "opus": {"type": "audio/opus"},
}
_FIXED_RATES = {"audio/pcmu": 8000, "audio/pcma": 8000, "audio/opus": 24000}
G711_FORMATS = frozenset({"audio/pcmu", "audio/pcma"})  # a telephone line's audio, at 8 kHz


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", validate_assignment=True)


class AudioFormat(_Strict):
    type: Literal["audio/pcm", "audio/pcmu", "audio/pcma", "audio/opus"] = "audio/pcm"
    rate: int = 24000

    @model_validator(mode="after")
    def _rate(self) -> AudioFormat:
        fixed = _FIXED_RATES.get(self.type)
        if fixed is not None:
            object.__setattr__(self, "rate", fixed)
        elif self.rate not in PCM_RATES:
            raise ValueError(f"audio/pcm rate must be one of {PCM_RATES}")
        return self


class TurnDetection(_Strict):
    """``server_vad`` (a pause of ``silence_duration_ms`` ends the turn) or ``semantic_vad`` (an
    end-of-turn model judges each pause; ``eagerness`` sets how long it waits)."""

    type: Literal["server_vad", "semantic_vad"] = "server_vad"
    threshold: float = Field(0.5, gt=0.0, le=1.0)
    prefix_padding_ms: int = Field(300, ge=0, le=5000)
    silence_duration_ms: int = Field(500, ge=100, le=10000)
    create_response: bool = True
    interrupt_response: bool = True
    idle_timeout_ms: int | None = Field(None, ge=1000, le=600000)
    eagerness: Literal["low", "medium", "high", "auto"] | None = None  # semantic_vad only


class Transcription(_Strict):
    model: str | None = "default"
    language: str | None = None
    prompt: str | None = None


class NoiseReductionConfig(_Strict):
    """``audio.input.noise_reduction``: WebRTC's suppressor before the VAD and the ASR."""

    type: Literal["near_field", "far_field"]


class AudioInput(_Strict):
    format: AudioFormat = Field(default_factory=AudioFormat)
    transcription: Transcription | None = Field(default_factory=Transcription)
    turn_detection: TurnDetection | None = Field(default_factory=TurnDetection)
    noise_reduction: NoiseReductionConfig | None = None  # None: off


class AudioOutput(_Strict):
    format: AudioFormat = Field(default_factory=AudioFormat)
    voice: str = "default"
    speed: float = Field(1.0, ge=0.25, le=1.5)


class AudioConfig(_Strict):
    input: AudioInput = Field(default_factory=AudioInput)
    output: AudioOutput = Field(default_factory=AudioOutput)


_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class FunctionTool(BaseModel):
    """A function the model may call (``session.tools[]``); the client runs it. ``async`` (an omnivox
    extension): the reply does not wait for it, and its output starts a response of its own."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: Literal["function"] = "function"
    name: str
    description: str = Field("", max_length=8192)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    run_async: bool = Field(False, alias="async", exclude_if=lambda run_async: not run_async)

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not _TOOL_NAME.match(name):
            raise ValueError("a tool name is 1-64 of a-z, A-Z, 0-9, _ and -")
        return name

    @field_validator("parameters")
    @classmethod
    def _schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        if schema.get("type", "object") != "object":
            raise ValueError('a tool\'s parameters must be a JSON schema of "type": "object"')
        if not isinstance(schema.get("properties", {}), dict):
            raise ValueError("a tool's parameters.properties must be an object")
        return schema

    def chat_tool(self) -> dict[str, Any]:
        """As chat completions take it."""
        fn = {"name": self.name, "description": self.description, "parameters": self.parameters}
        return {"type": "function", "function": fn}


class McpToolFilter(BaseModel):
    """Which of a server's tools a filter names (``allowed_tools``, ``require_approval``'s halves)."""

    model_config = ConfigDict(extra="ignore")

    tool_names: list[str] | None = None
    read_only: bool | None = None  # tools the server annotates with ``readOnlyHint``

    def names(self, name: str, read_only: bool) -> bool:
        """Whether the filter names the tool ``name``."""
        if self.tool_names is not None and name not in self.tool_names:
            return False
        return self.read_only is None or self.read_only == read_only


class McpApprovalFilter(BaseModel):
    model_config = ConfigDict(extra="ignore")

    always: McpToolFilter | None = None
    never: McpToolFilter | None = None


class McpTool(BaseModel):
    """An MCP server whose tools the model may call (``session.tools[]``, ``type: "mcp"``): omnivox
    is its client (``voice.mcp_client``). ``headers`` and ``authorization`` reach the server only:
    they are never logged and never echoed in ``session.updated``."""

    model_config = ConfigDict(extra="ignore")  # server_description, allowed_callers, ... are not used

    type: Literal["mcp"]
    server_label: str
    server_url: str = Field(max_length=2048)  # connectors (``connector_id``) are not served
    allowed_tools: list[str] | McpToolFilter | None = None
    require_approval: Literal["always", "never"] | McpApprovalFilter | None = "always"
    headers: dict[str, str] | None = None
    authorization: str | None = None

    @field_validator("server_label")
    @classmethod
    def _label(cls, label: str) -> str:
        if not _TOOL_NAME.match(label):
            raise ValueError("a server_label is 1-64 of a-z, A-Z, 0-9, _ and -")
        return label

    @field_validator("server_url")
    @classmethod
    def _url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError("an MCP server_url is an http:// or https:// URL")
        return url

    def allows(self, name: str, read_only: bool) -> bool:
        """Whether the model is offered the server's tool ``name``."""
        allowed = self.allowed_tools
        if allowed is None:
            return True
        if isinstance(allowed, list):
            return name in allowed
        return allowed.names(name, read_only)

    def needs_approval(self, name: str, read_only: bool) -> bool:
        """Whether calling ``name`` waits for the client's ``mcp_approval_response``."""
        rule = self.require_approval
        if rule is None or rule == "always":
            return True
        if rule == "never":
            return False
        if rule.never is not None and rule.never.names(name, read_only):
            return False
        if rule.always is not None:
            return rule.always.names(name, read_only)
        return True  # a filter that names only what needs none: the rest does

    def request_headers(self) -> dict[str, str]:
        """What the server is sent with every request (the client's headers, its bearer token)."""
        out = dict(self.headers or {})
        if self.authorization:
            out["Authorization"] = f"Bearer {self.authorization}"
        return out


Tool = Annotated[FunctionTool | McpTool, Field(discriminator="type")]


class ToolChoiceFunction(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["function"] = "function"
    name: str


ToolChoice = Literal["auto", "none", "required"] | ToolChoiceFunction


def chat_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice
    return {"type": "function", "function": {"name": choice.name}}


class OmnivoxOptions(_Strict):
    """omnivox's extension settings of a session: how speech over the assistant is judged."""

    echo_guard: bool = True  # the assistant's own words heard back do not interrupt it
    echo_canceller: EchoKind = "gate"  # the input against its echo: gate, aec3 or none (see the README)
    echo_gate_factor: float = Field(0.7, gt=0, le=4)  # the gate: input under this share of the reply is echo
    false_interruption_ms: int = Field(1500, ge=0, le=10000)  # resume a paused reply (0: cut at once)
    backchannels: list[Annotated[str, Field(max_length=64)]] = Field(
        default_factory=lambda: list(BACKCHANNELS), max_length=200
    )
    backchannel_max_ms: int = Field(1500, ge=0, le=5000)
    # every function call is asynchronous: the reply goes on while the client runs it, and its
    # output starts a response of its own (a function tool's ``async`` says so of one function)
    async_function_calls: bool = False
    # the line the caller's voice comes over: ``phone`` (G.711 at 8 kHz; a phone call's session is
    # set so by the gateway, and a client bridging its own calls says so) or ``wideband`` (a
    # microphone's own audio). It chooses what the judge of speech over a reply weighs. Unset, a
    # G.711 input (``audio/pcmu``, ``audio/pcma``) is taken for a phone line, any other for wideband
    line: Literal["wideband", "phone"] | None = None


Modality = Literal["text", "audio"]


def _audio_only() -> list[Modality]:
    return ["audio"]


class SessionConfig(_Strict):
    """A session's effective configuration. ``type: "transcription"`` sessions only hear: audio in,
    transcripts out per turn, never a response."""

    type: Literal["realtime", "transcription"] = "realtime"
    object: Literal["realtime.session"] = "realtime.session"
    id: str = Field(default_factory=lambda: new_id("sess"))
    model: str = "omnivox"
    instructions: str = ""
    output_modalities: list[Modality] = Field(default_factory=_audio_only, min_length=1)
    max_output_tokens: int | Literal["inf"] = "inf"
    audio: AudioConfig = Field(default_factory=AudioConfig)
    tools: list[Tool] = Field(default_factory=list, max_length=128)
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool = True
    omnivox: OmnivoxOptions = Field(default_factory=OmnivoxOptions)

    @model_validator(mode="after")
    def _choice(self) -> SessionConfig:
        choice = self.tool_choice
        if isinstance(choice, ToolChoiceFunction) and all(t.name != choice.name for t in self.functions):
            raise ValueError(f"tool_choice names {choice.name!r}, which is not in tools")
        labels = [t.server_label for t in self.mcp_servers]
        if len(set(labels)) != len(labels):
            raise ValueError("two mcp tools have one server_label")
        return self

    @property
    def functions(self) -> list[FunctionTool]:
        """The function tools (the client runs them)."""
        return [t for t in self.tools if isinstance(t, FunctionTool)]

    @property
    def mcp_servers(self) -> list[McpTool]:
        """The MCP servers (omnivox calls them)."""
        return [t for t in self.tools if isinstance(t, McpTool)]

    @property
    def audio_out(self) -> bool:
        return "audio" in self.output_modalities

    @property
    def transcription_only(self) -> bool:
        return self.type == "transcription"

    def wire(self) -> dict[str, Any]:
        if self.transcription_only:  # the GA transcription session's fields only
            inp = self.audio.input.model_dump(mode="json")
            return {
                "type": "transcription",
                "object": "realtime.transcription_session",
                "id": self.id,
                "audio": {"input": inp},
                "include": None,
            }
        out = self.model_dump(mode="json", by_alias=True)
        for tool in out["tools"]:
            if tool["type"] == "mcp":  # secrets go to the server only
                tool.pop("headers", None)
                tool.pop("authorization", None)
        return out


def _beta_to_ga(patch: dict[str, Any]) -> dict[str, Any]:
    """Move the flat beta fields of a session patch to their GA places."""
    out = {k: v for k, v in patch.items() if k not in _BETA_FIELDS}
    audio = _object(out.get("audio"), "session.audio")
    inp = _object(audio.get("input"), "session.audio.input")
    outp = _object(audio.get("output"), "session.audio.output")
    if "modalities" in patch:
        # beta allowed ["text", "audio"]: audio output always carries its transcript
        mods = patch["modalities"] or []
        out["output_modalities"] = ["audio"] if "audio" in mods else mods
    if "max_response_output_tokens" in patch:
        out["max_output_tokens"] = patch["max_response_output_tokens"]
    if "input_audio_format" in patch:
        inp["format"] = BETA_FORMATS.get(patch["input_audio_format"], patch["input_audio_format"])
    if "output_audio_format" in patch:
        outp["format"] = BETA_FORMATS.get(patch["output_audio_format"], patch["output_audio_format"])
    if "turn_detection" in patch:
        inp["turn_detection"] = patch["turn_detection"]
    if "input_audio_transcription" in patch:
        inp["transcription"] = patch["input_audio_transcription"]
    if "voice" in patch:
        outp["voice"] = patch["voice"]
    if "speed" in patch:
        outp["speed"] = patch["speed"]
    for key, fmt_holder in (("input", inp), ("output", outp)):
        fmt = fmt_holder.get("format")
        if isinstance(fmt, str):  # a beta name inside the GA form
            fmt_holder["format"] = BETA_FORMATS.get(fmt, {"type": fmt})
        if fmt_holder:
            audio[key] = fmt_holder
    if audio:
        out["audio"] = audio
    return out


def _object(value: object, param: str) -> dict[str, Any]:
    """A copy of a patch's nested object (absent or null: empty); anything else is refused."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidMessage(f"invalid {param}: expected an object", param=param)
    return dict(value)


_BETA_FIELDS = frozenset(
    {
        "modalities",
        "max_response_output_tokens",
        "input_audio_format",
        "output_audio_format",
        "turn_detection",
        "input_audio_transcription",
        "voice",
        "speed",
    }
)
_READ_ONLY = frozenset({"id", "object"})


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Recursive merge: dicts merge, anything else (null included) replaces."""
    out = dict(base)
    for key, value in patch.items():
        if key in _READ_ONLY:
            continue
        if key == "format":  # a format is one value ({type, rate}): a new one replaces the old whole
            out[key] = value
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def check_tools(
    config: SessionConfig,
    tools: list[dict[str, Any]] | None,
    tool_choice: str | dict[str, Any] | None,
    parallel: bool | None,
) -> tuple[list[Tool], ToolChoice, bool]:
    """A response's tools: ``response.create``'s own where it gives them, else the session's.
    Raises ``InvalidMessage`` naming the bad field (``response.tools.0.name``)."""
    patch: dict[str, Any] = {}
    if tools is not None:
        patch["tools"] = tools
    if tool_choice is not None:
        patch["tool_choice"] = tool_choice
    if parallel is not None:
        patch["parallel_tool_calls"] = parallel
    if not patch:
        return config.tools, config.tool_choice, config.parallel_tool_calls
    merged = {**config.model_dump(mode="json"), **patch}
    try:
        checked = SessionConfig.model_validate(merged)
    except ValidationError as exc:
        where, err = error_path(exc, merged)
        param = f"response.{where}" if where else "response"
        raise InvalidMessage(f"invalid {param}: {err['msg']}", param=param) from None
    return checked.tools, checked.tool_choice, checked.parallel_tool_calls


def apply_update(current: SessionConfig, patch: dict[str, Any]) -> SessionConfig:
    """``current`` with ``patch`` (a ``session.update``'s ``session``) applied; nothing changes on error.

    Raises ``InvalidMessage`` naming the offending field (as ``param``, e.g.
    ``session.audio.input.turn_detection.threshold``).
    """
    merged = _merge(current.model_dump(mode="json"), _beta_to_ga(patch))
    if merged.get("type") == "transcription" and merged["audio"]["input"].get("transcription") is None:
        merged["audio"]["input"]["transcription"] = {}  # a transcription session always transcribes
    try:
        return SessionConfig.model_validate(merged)
    except ValidationError as exc:
        where, err = error_path(exc, merged)
        param = f"session.{where}" if where else "session"
        raise InvalidMessage(f"invalid {param}: {err['msg']}", param=param) from None


# Settings omnivox accepts but does not serve: (path into the GA patch, what is said of it). A client
# hears of each once per session (``omnivox.warning``), rather than having it silently dropped.
_UNSERVED: tuple[tuple[tuple[str, ...], str], ...] = (
    (("include",), "logprobs are not reported"),
    (("tracing",), "traces are not kept"),
    (("truncation",), "the conversation is trimmed to the LLM's context its own way"),
    (("prompt",), "stored prompts are not served; send instructions"),
    (("reasoning",), "reasoning settings are not applied"),
    (("audio", "input", "transcription", "prompt"), "transcription prompts are not applied"),
)


def unserved(patch: dict[str, Any]) -> list[tuple[str, str]]:
    """(param, why) for each setting of ``patch`` (a ``session.update``'s ``session``) that omnivox
    accepts and ignores; settings set to null or left out say nothing."""
    ga = _beta_to_ga(patch)
    out = []
    for path, why in _UNSERVED:
        node: Any = ga
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node not in (None, [], {}, ""):
            out.append(("session." + ".".join(path), why))
    return out
