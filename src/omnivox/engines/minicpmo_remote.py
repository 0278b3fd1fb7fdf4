"""What omnivox assumes of MiniCPM-o 4.5's own model code (``trust_remote_code``): the one seam.

The model directory ships its Python (``modeling_minicpmo.py``) and that code changes between
revisions. Everything the adapter needs from it goes through this module, so a revision that
differs is fixed here and nowhere else. What it relies on, and where that was read:

Confirmed (the model card's examples, the OpenBMB MiniCPM-o-Demo worker ``core/processors/unified.py``
and its copy of the model code ``MiniCPMO45/modeling_minicpmo.py``, and several programs that drive
the published checkpoint):

- ``AutoModel.from_pretrained(path, trust_remote_code=True, attn_implementation="sdpa", <dtype>,
  init_vision=True, init_audio=True, init_tts=True)``; ``model.init_tts(...)`` loads the vocoder;
- ``model.as_duplex(device=..., generate_audio=..., ls_mode="explicit", force_listen_count=...,
  sliding_window_mode=...)`` -> a ``MiniCPMODuplex`` over the same weights, with
  ``prepare(prefix_system_prompt=, ref_audio=, prompt_wav_path=)``,
  ``streaming_prefill(audio_waveform=, frame_list=, max_slice_nums=)`` -> ``{"success", "reason", ...}``,
  ``streaming_generate(prompt_wav_path=, max_new_speak_tokens_per_chunk=, decode_mode=, temperature=,
  top_k=, top_p=, listen_prob_scale=)`` -> ``{"is_listen", "text", "audio_waveform" (24 kHz),
  "end_of_turn", "n_tokens", ...}``, ``set_session_stop()``, ``_reset_streaming_state()``,
  ``decoder.reset()``, ``decoder.get_cache_length()``, the attributes ``generate_audio``,
  ``force_listen_count``, ``CHUNK_MS``;
- turn-based: ``model.reset_session(reset_token2wav_cache=)``, ``model.streaming_prefill(session_id=,
  msgs=[{"role", "content": [str | PIL image | 16 kHz ndarray, ...]}], omni_mode=, is_last_chunk=, ...)``,
  ``model.init_token2wav_cache(prompt_speech_16k=)``, ``model.streaming_generate(session_id=,
  generate_audio=, max_new_tokens=, do_sample=, use_tts_template=True)`` yielding ``(waveform, text)``
  with audio and ``(text, finished)`` without; ``model._get_kv_cache_length()``.

Assumed, because revisions differ or no source showed it (each is one function below):

- ``streaming_generate(force_listen_override=)`` and ``finalize_unit()`` (the deferred finalize of
  the full-duplex loop) exist only in newer revisions: without the first a forced listen is asked for through
  ``force_listen_count``; without the second the revision closes the unit inside
  ``streaming_generate`` and finalize has nothing to do (``force_listen_args``, ``finalize_unit``);
- trimming to ``max_kv_tokens`` sets the decoder's "basic" sliding window (high = the limit, low =
  7/8 of it) through ``decoder._window_config`` (``apply_kv_limit``);
- releasing the vocoder's streaming caches clears ``tts.audio_tokenizer.{stream_cache,
  hift_cache_dict, cache}`` as the demo worker's cleanup does (``release_session``);
- text-only turn-based deltas may carry the chat template's end tokens, which are dropped
  (``clean_text``).
"""

from __future__ import annotations

import gc
import inspect
import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = "Streaming Omni Conversation."  # the model code's own default for duplex
OUTPUT_SAMPLE_RATE = 24000
# end markers a text-only turn-based delta can carry (decoded with special tokens kept)
_END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|tts_eos|>", "<|turn_eos|>")
_TTS_CACHES = ("stream_cache", "hift_cache_dict", "cache")


class RemoteCodeMismatch(RuntimeError):
    """The loaded model code lacks what the adapter needs (a revision omnivox does not know)."""


# ---- loading


def load_model(path: str, device: str) -> Any:
    """MiniCPM-o from a local directory through transformers with its own code, bf16, on ``device``."""
    import torch
    import transformers
    from transformers import AutoModel

    # transformers 4.56 renamed ``torch_dtype`` to ``dtype``; the model card pins 4.51
    major, minor = (int(p) for p in transformers.__version__.split(".")[:2])
    dtype_key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    model = AutoModel.from_pretrained(
        str(Path(path)),
        trust_remote_code=True,
        local_files_only=True,
        attn_implementation="sdpa",
        init_vision=True,
        init_audio=True,
        init_tts=True,
        **{dtype_key: torch.bfloat16},
    )
    return model.eval().to(device)


def init_tts(model: Any) -> None:
    """Load the streaming vocoder unless it is loaded (older code needs ``streaming=True`` for it)."""
    if getattr(getattr(model, "tts", None), "audio_tokenizer", None) is not None:
        return
    if not hasattr(model, "init_tts"):
        raise RemoteCodeMismatch("the model code has no init_tts(): is this a MiniCPM-o 4.5 directory?")
    if "streaming" in _params(model.init_tts):
        model.init_tts(streaming=True)
    else:
        model.init_tts()


def open_duplex(model: Any, device: str) -> Any:
    """The model's duplex wrapper over the loaded weights (one per worker, reused by sessions).

    Built with audio on (the TTS state it needs exists only then; a session without audio turns it
    off), no forced listens of its own (the worker decides those) and the basic sliding window.
    """
    if not hasattr(model, "as_duplex"):
        raise RemoteCodeMismatch(
            "the model code has no as_duplex(); update the model directory to a MiniCPM-o 4.5 "
            "revision with duplex support"
        )
    return model.as_duplex(
        device=device,
        generate_audio=True,
        ls_mode="explicit",
        force_listen_count=0,
        sliding_window_mode="basic",
    )


# ---- per unit


def force_listen_args(duplex: Any, force_listen: bool) -> tuple[dict[str, Any], Callable[[], None]]:
    """Keyword arguments asking ``streaming_generate`` for a forced listen, and an undo to run after.

    Newer code takes ``force_listen_override`` (closing a turn it cuts off); older code only forces
    the first ``force_listen_count`` units of a session, so the count is raised past this one.
    """
    if "force_listen_override" in _params(duplex.streaming_generate):
        return {"force_listen_override": force_listen}, _nothing
    if not force_listen:
        return {}, _nothing
    before = duplex.force_listen_count
    done = int(getattr(duplex, "_streaming_generate_count", 0))
    duplex.force_listen_count = done + 1

    def undo() -> None:
        duplex.force_listen_count = before

    return {}, undo


def finalize_unit(duplex: Any) -> bool:
    """Close the unit (terminators, ``</unit>``, window); False where the code did it in generate."""
    finalize = getattr(duplex, "finalize_unit", None)
    if finalize is None:
        return False
    if getattr(duplex, "needs_finalize", True):
        finalize()
    return True


_WINDOW_FIELDS = ("sliding_window_mode", "basic_window_high_tokens", "basic_window_low_tokens")


def _window_config(duplex: Any) -> Any:
    config = getattr(getattr(duplex, "decoder", None), "_window_config", None)
    return config if config is not None and hasattr(config, "basic_window_high_tokens") else None


def window_settings(duplex: Any) -> dict[str, Any] | None:
    """The decoder's sliding-window settings as loaded (None: not settable on this revision)."""
    config = _window_config(duplex)
    return {f: getattr(config, f) for f in _WINDOW_FIELDS} if config is not None else None


def apply_kv_limit(duplex: Any, max_kv_tokens: int | None, loaded: dict[str, Any] | None) -> bool:
    """Keep the duplex cache under ``max_kv_tokens`` with the basic window (None: the window as
    ``loaded``); False when the limit cannot be set on this revision."""
    config = _window_config(duplex)
    if config is None:
        return max_kv_tokens is None
    if max_kv_tokens is None:
        values = dict(loaded or {})
    else:
        values = dict(
            zip(_WINDOW_FIELDS, ("basic", max_kv_tokens, max(1, max_kv_tokens * 7 // 8)), strict=True)
        )
    for name, value in values.items():
        setattr(config, name, value)
    if max_kv_tokens is not None and hasattr(duplex.decoder, "set_window_enabled"):
        duplex.decoder.set_window_enabled(True)
    return True


def duplex_cache_length(duplex: Any) -> int:
    decoder = getattr(duplex, "decoder", None)
    return int(decoder.get_cache_length()) if decoder is not None else 0


def release_session(model: Any, duplex: Any | None) -> list[BaseException]:
    """Drop every per-session cache (duplex decoder, vocoder streams, turn-based KV); the failures."""
    steps: list[Callable[[], Any]] = []
    if duplex is not None:
        steps += [lambda: duplex._reset_streaming_state(), lambda: duplex.decoder.reset()]
    tokenizer = getattr(getattr(model, "tts", None), "audio_tokenizer", None)
    if tokenizer is not None:
        steps += [lambda: _clear_attrs(tokenizer, _TTS_CACHES)]
    steps += [lambda: model.reset_session(reset_token2wav_cache=True)]
    failures: list[BaseException] = []
    for step in steps:
        try:
            step()
        except Exception as exc:  # every step runs: one failure must not keep memory held
            log.warning("minicpmo cleanup step failed: %r", exc)
            failures.append(exc)
    return failures


def empty_device_cache() -> None:
    """Return freed memory to the driver (a no-op without CUDA)."""
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def no_grad() -> AbstractContextManager[Any]:
    """The model code decorates only some of its methods; every call here runs without autograd."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch comes with the model
        return nullcontext()
    return torch.no_grad()


# ---- data in and out


def rgb_to_images(frames: Sequence[np.ndarray]) -> list[Any]:
    """RGB uint8 HxWx3 arrays -> PIL images (what ``frame_list`` takes)."""
    if not frames:
        return []
    from PIL import Image

    return [Image.fromarray(np.ascontiguousarray(f)) for f in frames]


def encoded_image(raw: bytes) -> Any:
    """PNG/JPEG bytes -> an RGB PIL image."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(raw)) as image:
        return image.convert("RGB")


def to_audio(waveform: Any) -> np.ndarray | None:
    """A waveform the model returned (tensor or array, any shape) -> float32 mono, None if empty."""
    if waveform is None:
        return None
    if hasattr(waveform, "detach"):
        waveform = waveform.detach().float().cpu().numpy()
    audio = np.asarray(waveform, dtype=np.float32).reshape(-1)
    return audio if audio.size else None


def clean_text(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    for marker in _END_MARKERS:
        text = text.replace(marker, "")
    return text


def turn_items(items: Iterable[Any], with_audio: bool) -> Iterable[tuple[np.ndarray | None, str]]:
    """``streaming_generate``'s items -> (24 kHz audio or None, text delta)."""
    for item in items:
        if not isinstance(item, tuple | list) or len(item) < 2:
            continue
        if with_audio:
            yield to_audio(item[0]), clean_text(item[1])
        else:
            yield None, clean_text(item[0])


# ---- helpers


def _params(fn: Callable[..., Any]) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def _clear_attrs(obj: Any, names: Iterable[str]) -> None:
    for name in names:
        if getattr(obj, name, None) is not None:
            setattr(obj, name, None)


def _nothing() -> None:
    return None
