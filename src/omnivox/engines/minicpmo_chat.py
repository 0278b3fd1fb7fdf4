"""MiniCPM-o's turn-based streaming API behind the Engine's ``prefill`` / ``generate``.

The model holds the conversation's KV cache itself (``llm_past_key_values``): each message is
prefilled once with ``streaming_prefill`` and the reply that ``streaming_generate`` speaks stays in
the cache, so the next turn only adds its new messages. The adapter keeps the messages that cache
holds (for the worker's history hash) and counts tokens by the cache length before and after.

When a model call fails part-way the cache may hold half a message; the conversation is dropped
(``reset_session``) so the next turn is a clean cache miss rather than a silently wrong context.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from omnivox.audio.clips import decode_clip_at
from omnivox.core.errors import EngineFailure, PrefillRequired, UnsupportedContent
from omnivox.engines import minicpmo_remote as remote
from omnivox.engines.base import GenChunk, GenerateParams, GenResult, PrefillStats
from omnivox.engines.duplex import INPUT_SAMPLE_RATE
from omnivox.protocol.chat import AudioPart, ChatMessage, ImagePart, TextPart

SESSION_ID = "omnivox"  # the model keys its turn-based cache by session; a worker holds one


def model_content(message: ChatMessage) -> tuple[list[Any], bool]:
    """A message's content as the model takes it (str, PIL image, 16 kHz float32 array), and whether
    it is omni (image and audio together)."""
    if isinstance(message.content, str):
        return [message.content], False
    content: list[Any] = []
    for part in message.content:
        if isinstance(part, TextPart):
            content.append(part.text)
        elif isinstance(part, AudioPart):
            content.append(decode_clip_at(part.data, part.format, part.sample_rate, INPUT_SAMPLE_RATE))
        elif isinstance(part, ImagePart):
            try:
                content.append(remote.encoded_image(base64.b64decode(part.data, validate=True)))
            except Exception as exc:  # bad base64, or bytes PIL cannot read
                raise UnsupportedContent(f"undecodable image: {exc}", parts=["image"]) from None
    kinds = {type(c) for c in content}
    has_audio = np.ndarray in kinds
    has_image = any(k not in (str, np.ndarray) for k in kinds)
    return content, has_audio and has_image


class TurnChat:
    """The turn-based conversation held in the model's own cache."""

    def __init__(self, model: Any, voice: Callable[[str | None], np.ndarray | None]) -> None:
        self.model = model
        self._voice = voice  # a voice name -> 16 kHz reference audio (None: no voice)
        self.messages: list[ChatMessage] = []
        self._tts_voice: np.ndarray | None = None  # the reference the vocoder cache was built from

    @property
    def kv_length(self) -> int:
        return int(self.model._get_kv_cache_length())

    def reset(self) -> None:
        self.model.reset_session(reset_token2wav_cache=False)
        self.messages = []

    def forget(self) -> None:
        """The model's session was reset elsewhere (a duplex session): hold nothing."""
        self.messages = []
        self._tts_voice = None

    def prefill(self, messages: list[ChatMessage]) -> PrefillStats:
        converted = [model_content(m) for m in messages]  # reject bad content before any change
        before = self.kv_length
        try:
            with remote.no_grad():
                for i, (message, (content, omni)) in enumerate(zip(messages, converted, strict=True)):
                    self.model.streaming_prefill(
                        session_id=SESSION_ID,
                        msgs=[{"role": message.role, "content": content}],
                        omni_mode=omni,
                        max_slice_nums=None,
                        use_tts_template=True,
                        enable_thinking=False,
                        is_last_chunk=i == len(messages) - 1,
                        stream_input=False,
                    )
                    self.messages.append(message.model_copy(deep=True))
        except Exception as exc:
            self._drop()
            raise EngineFailure(f"MiniCPM-o prefill failed (conversation dropped): {exc}") from exc
        after = self.kv_length
        return PrefillStats(after, len(self.messages), before, max(0, after - before))

    def generate(
        self, params: GenerateParams, stop: threading.Event, result: GenResult
    ) -> Iterator[GenChunk]:
        if not self.messages:
            raise PrefillRequired("nothing to answer: prefill a conversation first")
        if params.generate_audio:
            self._init_voice(params.voice)
        before = self.kv_length
        items: Any = None
        text: list[str] = []
        failed = False
        try:
            items = self.model.streaming_generate(
                session_id=SESSION_ID,
                generate_audio=params.generate_audio,
                max_new_tokens=params.max_new_tokens,
                do_sample=params.temperature is None or params.temperature > 0,
                use_tts_template=True,
                enable_thinking=False,
            )
            pieces = iter(remote.turn_items(items, params.generate_audio))
            while not stop.is_set():
                with remote.no_grad():  # per step: the consumer runs between steps with its own mode
                    piece = next(pieces, None)
                if piece is None:
                    break
                audio, delta = piece
                if delta or audio is not None:
                    text.append(delta)
                    yield GenChunk(text_delta=delta, audio=audio)
            result.stopped = stop.is_set()
        except GeneratorExit:
            result.stopped = True
            raise
        except Exception as exc:
            failed = True
            raise EngineFailure(f"MiniCPM-o generation failed (conversation dropped): {exc}") from exc
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
            result.text = "".join(text)
            if failed:
                self._drop()
            else:
                # the cache holds the reply as generated; a stopped reply may hold a little more
                self.messages.append(ChatMessage(role="assistant", content=result.text))
                result.generated_tokens = max(0, self.kv_length - before)

    def _init_voice(self, name: str | None) -> None:
        voice = self._voice(name)
        if voice is None:
            raise UnsupportedContent(
                "generate_audio needs a reference voice: start the worker with "
                "OMNIVOX_MINICPMO_REF_AUDIO set to a WAV file",
                parts=["audio"],
            )
        if self._tts_voice is voice and getattr(self.model, "token2wav_cache", None) is not None:
            return
        with remote.no_grad():
            self.model.init_token2wav_cache(prompt_speech_16k=voice)
        self._tts_voice = voice

    def _drop(self) -> None:
        try:
            self.model.reset_session(reset_token2wav_cache=False)
        finally:
            self.messages = []
