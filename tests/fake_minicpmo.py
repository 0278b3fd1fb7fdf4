"""A recording fake of MiniCPM-o 4.5's model object (its ``trust_remote_code`` surface), for tests.

``FakeMiniCPMo`` stands where ``AutoModel.from_pretrained(..., trust_remote_code=True)`` would
return the real model; ``as_duplex()`` gives a ``FakeMiniCPMoDuplex``. They have the real method
names and parameters (see ``omnivox.engines.minicpmo_remote``) and record every call, in order, in
the model's ``calls`` list as ``(name, kwargs)``. Decisions are scripted: queue ``listen()`` or
``speak(...)`` results on ``duplex.script``; an empty script listens. ``fail_on`` names calls that
raise. ``revision="old"`` builds a duplex without ``force_listen_override`` and ``finalize_unit``
(code that closes each unit inside ``streaming_generate``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

Call = tuple[str, dict[str, Any]]


class FakeFailure(RuntimeError):
    """What a call named in ``fail_on`` raises (a CUDA error, an assertion in the model code)."""


def listen() -> dict[str, Any]:
    return {"is_listen": True}


def speak(text: str, samples: int = 2400, end_of_turn: bool = False, waveform: Any = None) -> dict[str, Any]:
    audio = waveform if waveform is not None else np.full(samples, 0.25, dtype=np.float32)
    return {"is_listen": False, "text": text, "audio_waveform": audio, "end_of_turn": end_of_turn}


@dataclass
class FakeDecoder:
    model: FakeMiniCPMo
    length: int = 0
    _window_config: Any = field(
        default_factory=lambda: SimpleNamespace(
            sliding_window_mode="basic", basic_window_high_tokens=4000, basic_window_low_tokens=3500
        )
    )

    def reset(self) -> None:
        self.model.record("decoder.reset")
        self.length = 0

    def get_cache_length(self) -> int:
        return self.length

    def set_window_enabled(self, enabled: bool) -> None:
        self.model.record("decoder.set_window_enabled", enabled=enabled)


class FakeMiniCPMoDuplex:
    """``MiniCPMODuplex`` of a newer revision: per-call forced listen, deferred ``finalize_unit``."""

    def __init__(self, model: FakeMiniCPMo, **config: Any) -> None:
        self.model = model
        self.generate_audio = config.get("generate_audio", True)
        self.force_listen_count = config.get("force_listen_count", 0)
        self.CHUNK_MS = config.get("chunk_ms", 1000)
        self.decoder = FakeDecoder(model)
        self.script: list[dict[str, Any]] = []
        self.seen_force_listen_count: list[int] = []  # force_listen_count at each generate
        self.prompt_wav_bytes: bytes | None = None  # the reference file as prepare found it
        self._streaming_generate_count = 0
        self._pending = False

    def prepare(
        self,
        prefix_system_prompt: str | None = "Streaming Omni Conversation.",
        suffix_system_prompt: str | None = None,
        ref_audio: np.ndarray | None = None,
        prompt_wav_path: str | None = None,
        context_previous_marker: str = "\n\nprevious: ",
    ) -> str:
        self.model.check("prepare")
        self.model.record(
            "prepare",
            prefix_system_prompt=prefix_system_prompt,
            ref_audio=ref_audio,
            prompt_wav_path=prompt_wav_path,
            generate_audio=self.generate_audio,
        )
        if prompt_wav_path:
            with open(prompt_wav_path, "rb") as f:
                self.prompt_wav_bytes = f.read()
        self._streaming_generate_count = 0
        self.decoder.length = 100
        return prefix_system_prompt or ""

    def streaming_prefill(
        self,
        audio_waveform: np.ndarray | None = None,
        frame_list: list[Any] | None = None,
        text_list: list[str] | None = None,
        max_slice_nums: int = 1,
        batch_vision_feed: bool = False,
    ) -> dict[str, Any]:
        self.model.check("streaming_prefill")
        if self._pending:
            raise AssertionError("streaming_prefill called before finalize_unit()")
        self.model.record(
            "streaming_prefill",
            audio_waveform=audio_waveform,
            frame_list=frame_list,
            max_slice_nums=max_slice_nums,
        )
        self.decoder.length += 1 + 10 * (1 + len(frame_list or []))
        return {"success": audio_waveform is not None and len(audio_waveform) > 0, "reason": ""}

    def streaming_generate(
        self,
        prompt_wav_path: str | None = None,
        max_new_speak_tokens_per_chunk: int = 20,
        decode_mode: str = "sampling",
        temperature: float = 0.7,
        top_k: int = 20,
        top_p: float = 0.8,
        listen_prob_scale: float = 1.0,
        listen_top_k: int | None = None,
        text_repetition_penalty: float = 1.05,
        text_repetition_window_size: int = 512,
        length_penalty: float = 1.1,
        force_listen_override: bool = False,
    ) -> dict[str, Any]:
        kwargs = dict(locals())
        del kwargs["self"]
        return self._generate(kwargs, force_listen_override)

    def _generate(self, kwargs: dict[str, Any], override: bool) -> dict[str, Any]:
        self.model.check("streaming_generate")
        self.model.record("streaming_generate", **kwargs)
        self.seen_force_listen_count.append(self.force_listen_count)
        forced = override or self._streaming_generate_count < self.force_listen_count
        self._streaming_generate_count += 1
        out = listen() if forced or not self.script else self.script.pop(0)
        if out["is_listen"]:  # the real code returns a second of silence when it listens
            out = {**out, "audio_waveform": np.zeros(24000, dtype=np.float32), "text": ""}
        elif not self.generate_audio:
            out = {**out, "audio_waveform": None}
        self.decoder.length += 2
        self._pending = True
        return {"end_of_turn": False, "n_tokens": 3, "current_time": self._streaming_generate_count, **out}

    @property
    def needs_finalize(self) -> bool:
        return self._pending

    def finalize_unit(self) -> None:
        self.model.check("finalize_unit")
        self.model.record("finalize_unit")
        self._pending = False
        self.decoder.length += 1

    def set_session_stop(self) -> None:
        self.model.record("set_session_stop")

    def _reset_streaming_state(self) -> None:
        self.model.record("_reset_streaming_state")
        self._pending = False


class FakeOldMiniCPMoDuplex(FakeMiniCPMoDuplex):
    """An older revision: no ``force_listen_override``, each unit closed inside generate."""

    finalize_unit = None  # type: ignore[assignment]

    def streaming_generate(  # type: ignore[override]
        self,
        prompt_wav_path: str | None = None,
        max_new_speak_tokens_per_chunk: int = 20,
        decode_mode: str = "sampling",
        temperature: float = 0.7,
        top_k: int = 20,
        top_p: float = 0.8,
        listen_prob_scale: float = 1.0,
        listen_top_k: int | None = None,
        text_repetition_penalty: float = 1.05,
        text_repetition_window_size: int = 512,
    ) -> dict[str, Any]:
        kwargs = dict(locals())
        del kwargs["self"]
        out = self._generate(kwargs, False)
        self._pending = False
        return out


class FakeMiniCPMo:
    """The model object: the turn-based API, ``init_tts`` and ``as_duplex``."""

    def __init__(
        self, revision: str = "new", fail_on: set[str] | None = None, as_duplex_inits_tts: bool = False
    ) -> None:
        self.revision = revision
        self.as_duplex_inits_tts = as_duplex_inits_tts  # as some revisions' as_duplex does
        self.fail_on = set(fail_on or ())
        self.calls: list[Call] = []
        self.tts = SimpleNamespace(audio_tokenizer=None)
        self.CHUNK_MS = 1000
        self.token2wav_cache: Any = None
        self.kv = 0
        self.replies: list[list[tuple[Any, Any]]] = []  # items each streaming_generate yields
        self.duplex: FakeMiniCPMoDuplex | None = None

    def record(self, name: str, **kwargs: Any) -> None:
        self.calls.append((name, kwargs))

    def check(self, name: str) -> None:
        if name in self.fail_on:
            raise FakeFailure(f"{name} failed")

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def kwargs(self, name: str) -> list[dict[str, Any]]:
        return [kw for n, kw in self.calls if n == name]

    # ---- loading

    def init_tts(
        self, model_dir: str | None = None, enable_float16: bool = False, n_timesteps: int = 10
    ) -> Any:
        self.check("init_tts")
        self.record("init_tts", model_dir=model_dir)
        self.tts.audio_tokenizer = SimpleNamespace(
            stream_cache=object(), hift_cache_dict={"x": 1}, cache=object()
        )
        return self.tts.audio_tokenizer

    def as_duplex(self, device: str | None = None, **kwargs: Any) -> FakeMiniCPMoDuplex:
        self.check("as_duplex")
        self.record("as_duplex", device=device, **kwargs)
        if self.as_duplex_inits_tts:
            self.init_tts()
        cls = FakeOldMiniCPMoDuplex if self.revision == "old" else FakeMiniCPMoDuplex
        self.duplex = cls(self, **kwargs)
        return self.duplex

    # ---- turn-based

    def reset_session(self, reset_token2wav_cache: bool = True) -> None:
        self.check("reset_session")
        self.record("reset_session", reset_token2wav_cache=reset_token2wav_cache)
        self.kv = 0
        if reset_token2wav_cache:
            self.token2wav_cache = None

    def streaming_prefill(
        self,
        session_id: str,
        msgs: list[dict[str, Any]],
        omni_mode: bool = True,
        max_slice_nums: int | None = None,
        use_tts_template: bool = True,
        enable_thinking: bool = False,
        is_last_chunk: bool = False,
        **kwargs: Any,
    ) -> str:
        self.check("streaming_prefill")
        assert len(msgs) == 1
        self.record(
            "model.streaming_prefill",
            session_id=session_id,
            msgs=msgs,
            omni_mode=omni_mode,
            is_last_chunk=is_last_chunk,
            use_tts_template=use_tts_template,
        )
        self.kv += 5 * len(msgs[0]["content"])
        return ""

    def init_token2wav_cache(self, prompt_speech_16k: np.ndarray) -> None:
        self.record("init_token2wav_cache", prompt_speech_16k=prompt_speech_16k)
        self.token2wav_cache = {"flow_cache_base": object()}

    def streaming_generate(
        self,
        session_id: str,
        generate_audio: bool = True,
        max_new_tokens: int = 256,
        do_sample: bool = True,
        use_tts_template: bool = True,
        enable_thinking: bool = False,
        **kwargs: Any,
    ) -> Iterator[tuple[Any, Any]]:
        self.check("streaming_generate")
        self.record(
            "model.streaming_generate",
            session_id=session_id,
            generate_audio=generate_audio,
            max_new_tokens=max_new_tokens,
            do_sample=do_sample,
        )
        if generate_audio and self.token2wav_cache is None:
            raise TypeError("'NoneType' object is not subscriptable")  # what the real code does
        for item in self.replies.pop(0) if self.replies else []:
            if item == "fail":
                raise FakeFailure("streaming_generate failed mid-reply")
            self.kv += 2
            yield item
        self.record("model.streaming_generate.done")

    def _get_kv_cache_length(self) -> int:
        return self.kv


class FakeOldMiniCPMo(FakeMiniCPMo):
    """An older revision's model: ``init_tts`` needs ``streaming=True`` for the streaming vocoder."""

    def __init__(self, fail_on: set[str] | None = None) -> None:
        super().__init__(revision="old", fail_on=fail_on)

    def init_tts(  # type: ignore[override]
        self,
        streaming: bool = False,
        model_dir: str | None = None,
        enable_float16: bool = False,
        n_timesteps: int = 10,
    ) -> Any:
        self.record("init_tts", streaming=streaming)
        self.tts.audio_tokenizer = SimpleNamespace(stream_cache=object(), hift_cache_dict={}, cache=None)
        return self.tts.audio_tokenizer


def wav_exists(path: str | None) -> bool:
    return bool(path) and os.path.exists(path)  # type: ignore[arg-type]
