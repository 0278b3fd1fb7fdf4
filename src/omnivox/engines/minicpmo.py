"""MiniCPM-o 4.5 through transformers: full duplex and turn-based streaming.

``--engine minicpmo --model PATH --device cuda``. ``load()`` imports torch and transformers, loads
the checkpoint with its own code (bf16), its streaming vocoder and its duplex wrapper; every call
into the model goes through ``minicpmo_remote``, the one place that knows that code's surface.

A duplex session is ``duplex_prepare`` then, per unit, ``duplex_prefill`` -> ``duplex_generate``
-> ``duplex_finalize`` (``UnitPhase`` checks the order), ended by ``duplex_cleanup``. The model
decides listen or speak itself; the worker's forced listens (the first units, the client's
``force_listen``) are passed through. Speech comes out at 24 kHz in the voice of the reference
audio (the client's, else ``OMNIVOX_MINICPMO_REF_AUDIO``); without one, speak units carry text only.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import Any, Literal

import numpy as np

from omnivox.audio.resample import resample
from omnivox.audio.wav import read_wav, write_wav_file
from omnivox.core.errors import EngineFailure, IllegalTransition, InvalidAudio, UnsupportedContent
from omnivox.engines import minicpmo_remote as remote
from omnivox.engines.base import ChatModel, Engine, GenChunk, GenerateParams, GenResult, PrefillStats
from omnivox.engines.duplex import INPUT_SAMPLE_RATE, DuplexModel, DuplexParams, DuplexReady, DuplexUnit
from omnivox.engines.minicpmo_chat import TurnChat
from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.control.workers import Capabilities

log = logging.getLogger(__name__)

CAPABILITIES = Capabilities(streaming=True, duplex=True, audio_in=True, audio_out=True, vision=True)
DEFAULT_VOICE = "default"
TRAINED_UNIT_MS = 1000  # the unit length the model was trained on


class UnitPhase(StrEnum):
    """Where a duplex session is in its unit loop."""

    IDLE = "idle"  # no session (before prepare, after cleanup)
    READY = "ready"  # prepared, or the last unit finalized: the next prefill may run
    PREFILLED = "prefilled"  # this unit heard: generate next
    GENERATED = "generated"  # this unit decided: finalize next
    FAILED = "failed"  # a model call failed: only cleanup helps


# what each call may start from, and where it leaves the session
_MOVES: dict[str, tuple[frozenset[UnitPhase], UnitPhase]] = {
    "duplex_prefill": (frozenset({UnitPhase.READY}), UnitPhase.PREFILLED),
    "duplex_generate": (frozenset({UnitPhase.PREFILLED}), UnitPhase.GENERATED),
    "duplex_finalize": (frozenset({UnitPhase.GENERATED}), UnitPhase.READY),
}


def check_move(phase: UnitPhase, call: str) -> UnitPhase:
    """The phase ``call`` leads to from ``phase``; a failed session or a call out of order raises."""
    sources, target = _MOVES[call]
    if phase is UnitPhase.FAILED:
        raise EngineFailure(f"{call}: this duplex session failed earlier; clean it up and prepare again")
    if phase not in sources:
        raise IllegalTransition(f"{call} in duplex phase {phase.value}", phase=phase.value, call=call)
    return target


ModelLoader = Callable[[str, str], Any]


class MiniCPMoEngine(Engine, ChatModel):
    """One MiniCPM-o 4.5 model per worker: duplex sessions and turn-based streaming."""

    name = "minicpmo"
    capabilities = CAPABILITIES
    hears = speaks = sees = True

    @property
    def chat(self) -> ChatModel:
        return self  # turn-based streaming (refused while a duplex session holds the model)

    @property
    def duplex(self) -> DuplexModel:
        return MiniCPMoUnits(self)

    def __init__(
        self,
        model_path: str,
        device: str = "cuda",
        ref_audio_path: str | None = None,
        *,
        load_model: ModelLoader = remote.load_model,
    ) -> None:
        self.model_path = model_path
        self.device = device
        self.ref_audio_path = ref_audio_path
        self._load_model = load_model
        self.model: Any = None
        self.duplex_model: Any = None  # the model's own duplex object (its code's)
        self._chat: TurnChat | None = None
        self._default_voice: np.ndarray | None = None
        self._window: dict[str, Any] | None = None  # the duplex cache window as loaded
        self.phase = UnitPhase.IDLE
        self._params = DuplexParams()
        self._prompt_wav: str | None = None  # the session's TTS reference, written for the vocoder
        self._speaking = False  # the assistant's turn is open (its last unit spoke, not finished)

    # ---- loading

    def load(self) -> None:
        if not os.path.isdir(self.model_path):
            raise EngineFailure(f"MiniCPM-o model directory not found: {self.model_path}")
        try:
            if self.ref_audio_path:
                audio, rate = read_wav(self.ref_audio_path)
                self._default_voice = resample(audio, rate, INPUT_SAMPLE_RATE)
            model = self._load_model(self.model_path, self.device)
            with remote.no_grad():
                # some revisions load the vocoder inside as_duplex: only load it if still missing
                duplex = remote.open_duplex(model, self.device)
                remote.init_tts(model)
        except Exception as exc:
            raise EngineFailure(f"cannot load MiniCPM-o from {self.model_path}: {exc}") from exc
        self.model, self.duplex_model = model, duplex
        self._window = remote.window_settings(duplex)
        self._chat = TurnChat(model, self._voice)
        self.voices = (DEFAULT_VOICE,) if self._default_voice is not None else ()
        self.name = f"minicpmo:{os.path.basename(os.path.normpath(self.model_path))}"
        remote.empty_device_cache()

    @property
    def turns(self) -> TurnChat:
        if self._chat is None:
            raise EngineFailure("the MiniCPM-o engine is not loaded")
        return self._chat

    def _voice(self, name: str | None) -> np.ndarray | None:
        """The reference audio for ``name``; the one voice there is answers to every name."""
        return self._default_voice

    # ---- turn-based streaming

    def reset(self) -> None:
        self._no_duplex("reset")
        self.turns.reset()

    def prefill(self, messages: list[ChatMessage]) -> PrefillStats:
        self._no_duplex("prefill")
        return self.turns.prefill(messages)

    def generate(
        self, params: GenerateParams, stop: threading.Event, result: GenResult
    ) -> Iterator[GenChunk]:
        self._no_duplex("generate")
        return self.turns.generate(params, stop, result)

    @property
    def kv_length(self) -> int:
        if self.model is None:
            return 0
        if self.phase is not UnitPhase.IDLE:
            return remote.duplex_cache_length(self.duplex_model)
        return self.turns.kv_length

    def held_messages(self) -> list[ChatMessage]:
        return list(self._chat.messages) if self._chat is not None else []

    def _no_duplex(self, call: str) -> None:
        if self.phase is not UnitPhase.IDLE:
            raise IllegalTransition(f"{call}: a duplex session holds the model", call=call)

    # ---- full duplex

    def duplex_prepare(self, params: DuplexParams) -> DuplexReady:
        """Start a session: forget any previous one, then the prompt, the voice and the settings."""
        if self.model is None:
            raise EngineFailure("the MiniCPM-o engine is not loaded")
        if self.phase is not UnitPhase.IDLE:
            self.duplex_cleanup()
        notes: list[str] = []
        duplex, model = self.duplex_model, self.model
        tts_ref = next((a for a in (params.tts_ref_audio, params.ref_audio) if a is not None), None)
        tts_ref = tts_ref if tts_ref is not None else self._voice(params.voice)
        speech = params.generate_audio and tts_ref is not None
        if params.generate_audio and not speech:
            notes.append("no reference voice: speak units carry text only (send tts_ref_audio_base64)")
        if params.chunk_ms != TRAINED_UNIT_MS:
            notes.append(f"the model was trained on {TRAINED_UNIT_MS} ms units, not {params.chunk_ms} ms")
        try:
            # the turn-based conversation shares the model: a duplex session starts from nothing
            model.reset_session(reset_token2wav_cache=True)
            self.turns.forget()
            duplex.generate_audio = speech
            duplex.force_listen_count = 0
            duplex.CHUNK_MS = model.CHUNK_MS = params.chunk_ms
            if not remote.apply_kv_limit(duplex, params.max_kv_tokens, self._window):
                notes.append("max_kv_tokens is not settable on this model revision: its own window is used")
            if params.seed is not None:
                import torch

                torch.manual_seed(params.seed)
            self._prompt_wav = self._write_prompt_wav(tts_ref) if speech and tts_ref is not None else None
            llm_ref = params.ref_audio if params.ref_audio is not None else self._voice(params.voice)
            with remote.no_grad():
                duplex.prepare(
                    prefix_system_prompt=params.system_prompt or remote.DEFAULT_SYSTEM_PROMPT,
                    ref_audio=llm_ref,
                    prompt_wav_path=self._prompt_wav,
                )
        except Exception as exc:
            self._fail_prepare()
            raise EngineFailure(f"MiniCPM-o duplex prepare failed: {exc}") from exc
        self._params = params
        self._speaking = False
        self.phase = UnitPhase.READY
        return DuplexReady(vision=True, notes=tuple(notes))

    def duplex_prefill(self, audio: np.ndarray, frames: list[np.ndarray]) -> None:
        target = check_move(self.phase, "duplex_prefill")
        samples = _unit_audio(audio)
        images = _unit_images(frames) if self._params.mode == "omni" else []
        with self._model_call("duplex_prefill"):
            done = self.duplex_model.streaming_prefill(
                audio_waveform=samples, frame_list=images or None, max_slice_nums=1
            )
        if isinstance(done, dict) and not done.get("success", True):
            # not an error: the model buffers short audio, and generate then listens
            log.debug("minicpmo prefill took no unit: %s", done.get("reason") or "no input")
        self.phase = target

    def duplex_generate(self, force_listen: bool) -> DuplexUnit:
        target = check_move(self.phase, "duplex_generate")
        p = self._params
        force, undo = remote.force_listen_args(self.duplex_model, force_listen)
        try:
            with self._model_call("duplex_generate"):
                out = self.duplex_model.streaming_generate(
                    prompt_wav_path=self._prompt_wav,
                    max_new_speak_tokens_per_chunk=p.max_new_speak_tokens,
                    decode_mode="sampling" if p.temperature > 0 else "greedy",
                    temperature=p.temperature,
                    top_k=p.top_k,
                    top_p=p.top_p,
                    listen_prob_scale=p.listen_prob_scale,
                    **force,
                )
        finally:
            undo()
        self.phase = target
        return self._unit(out)

    def duplex_finalize(self) -> None:
        if self.phase is UnitPhase.READY:
            return  # already closed (a second call, or a revision that closes units in generate)
        target = check_move(self.phase, "duplex_finalize")
        with self._model_call("duplex_finalize"):
            remote.finalize_unit(self.duplex_model)
        self.phase = target

    def duplex_cleanup(self) -> None:
        """Release the session's caches and the device memory they held; safe at any time."""
        was_active = self.phase is not UnitPhase.IDLE
        self.phase = UnitPhase.IDLE
        self._speaking = False
        failures: list[BaseException] = []
        if self.model is not None:
            if was_active and hasattr(self.duplex_model, "set_session_stop"):
                try:
                    self.duplex_model.set_session_stop()
                except Exception as exc:
                    failures.append(exc)
            failures += remote.release_session(self.model, self.duplex_model)
            self.turns.forget()
        self._remove_prompt_wav()
        remote.empty_device_cache()
        if failures:
            raise EngineFailure(f"MiniCPM-o cleanup: {len(failures)} step(s) failed: {failures[0]!r}")

    def close(self) -> None:
        try:
            self.duplex_cleanup()
        finally:
            self.model = self.duplex_model = self._chat = None
            remote.empty_device_cache()

    # ---- internals

    def _unit(self, out: Any) -> DuplexUnit:
        if not isinstance(out, dict):
            self.phase = UnitPhase.FAILED
            raise EngineFailure(f"MiniCPM-o streaming_generate returned {type(out).__name__}, not a dict")
        tokens = int(out.get("n_tokens") or 0)
        if out.get("is_listen", True):
            cut_off, self._speaking = self._speaking, False  # a listen ends an open turn
            return DuplexUnit(is_listen=True, end_of_turn=cut_off, tokens=tokens)
        end = bool(out.get("end_of_turn", False))
        self._speaking = not end
        audio = remote.to_audio(out.get("audio_waveform")) if self._prompt_wav else None
        return DuplexUnit(
            is_listen=False, text=str(out.get("text") or ""), audio=audio, end_of_turn=end, tokens=tokens
        )

    def _model_call(self, call: str) -> _ModelCall:
        return _ModelCall(self, call)

    def _write_prompt_wav(self, audio: np.ndarray) -> str:
        # the vocoder reads its reference from a file path
        fd, path = tempfile.mkstemp(prefix="omnivox-minicpmo-voice-", suffix=".wav")
        os.close(fd)
        write_wav_file(path, audio, INPUT_SAMPLE_RATE)
        return path

    def _remove_prompt_wav(self) -> None:
        path, self._prompt_wav = self._prompt_wav, None
        if path:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _fail_prepare(self) -> None:
        self.phase = UnitPhase.IDLE
        try:
            self.duplex_cleanup()
        except EngineFailure as exc:
            log.warning("minicpmo cleanup after a failed prepare: %s", exc)


class _ModelCall:
    """Runs one model call without autograd; a failure marks the session FAILED and is an
    ``EngineFailure`` (the model's state is unknown until cleanup)."""

    def __init__(self, engine: MiniCPMoEngine, call: str) -> None:
        self._engine, self._call, self._grad = engine, call, remote.no_grad()

    def __enter__(self) -> None:
        self._grad.__enter__()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> Literal[False]:
        self._grad.__exit__(kind, exc, tb)
        if exc is None or not isinstance(exc, Exception):
            return False
        self._engine.phase = UnitPhase.FAILED
        raise EngineFailure(f"MiniCPM-o {self._call} failed: {exc}") from exc


def _unit_audio(audio: np.ndarray) -> np.ndarray:
    a = np.asarray(audio)
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.floating):
        raise InvalidAudio(f"duplex audio must be 1-D float samples, got {a.dtype} {a.shape}")
    a = a.astype(np.float32, copy=False)
    if not np.all(np.isfinite(a)):
        raise InvalidAudio("duplex audio contains NaN or infinite samples")
    return a


def _unit_images(frames: list[np.ndarray]) -> list[Any]:
    """Omni frames (RGB uint8 HxWx3) -> the PIL images ``frame_list`` takes."""
    for f in frames:
        if not (isinstance(f, np.ndarray) and f.dtype == np.uint8 and f.ndim == 3 and f.shape[2] == 3):
            shape = getattr(f, "shape", None)
            raise UnsupportedContent(f"frames must be RGB uint8 HxWx3 arrays, got {shape}", parts=["image"])
    try:
        return remote.rgb_to_images(frames)
    except ImportError as exc:
        raise EngineFailure(f"omni frames need Pillow, which the model requires too: {exc}") from exc


class MiniCPMoUnits(DuplexModel):
    """The engine's ``duplex`` role: its ``duplex_*`` steps (``UnitPhase`` checks their order)."""

    def __init__(self, engine: MiniCPMoEngine) -> None:
        self.engine = engine

    def prepare(self, params: DuplexParams) -> DuplexReady:
        return self.engine.duplex_prepare(params)

    def prefill(self, audio: np.ndarray, frames: list[np.ndarray]) -> None:
        self.engine.duplex_prefill(audio, frames)

    def generate(self, force_listen: bool) -> DuplexUnit:
        return self.engine.duplex_generate(force_listen)

    def finalize(self) -> None:
        self.engine.duplex_finalize()

    def cleanup(self) -> None:
        self.engine.duplex_cleanup()

    @property
    def kv_length(self) -> int:
        return self.engine.kv_length
