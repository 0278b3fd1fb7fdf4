"""The settings of a conversation (part of ``core.config``'s one ``Settings``): the voice models,
realtime sessions (turn taking, interruptions, the echo guard) and full-duplex sessions."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

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
