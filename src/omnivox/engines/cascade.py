"""The cascade engine: speech in -> ASR -> LLM -> TTS -> speech out, as one engine a worker hosts.

Its models (VAD, ASR, TTS, LLM: a ``VoiceStack``) load once, in ``load()``, when the worker starts;
sessions borrow them. Its roles (``engines.base``):

- ``voice``: the stack itself (a ``VoiceStack`` is ``VoiceModels``), for realtime sessions and
  duplex sessions over the voice agent;
- ``chat``: ``CascadeChat``, turn-based streaming over voice models: the audio parts of prefilled
  messages are transcribed (the transcript is what the LLM sees, and what ``prefill_done``
  reports), and ``generate`` streams the reply as whole words with, when asked for, each
  sentence's 24 kHz audio as soon as it is synthesised, while the LLM writes the next one (the
  voice models' ``reply``). The pipeline engine uses the same ``CascadeChat`` over its stages.

The chat holds two views of the conversation: the messages as the client sent them (their hash is
what the gateway routes on) and their text form (what the LLM is given). A remote LLM server has its
own prefix cache; "tokens" here are the approximate counts of ``voice.llm.history``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from omnivox.audio.clips import decode_clip_at
from omnivox.core.errors import PrefillRequired
from omnivox.engines.base import ChatModel, Engine, GenChunk, GenerateParams, GenResult, PrefillStats
from omnivox.protocol.chat import AudioPart, ChatMessage, ImagePart, TextPart
from omnivox.protocol.control.workers import Capabilities
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.history import history_tokens, trim_history
from omnivox.voice.models import VoiceModels
from omnivox.voice.reply import ReplyRequest, Spoken, Word
from omnivox.voice.stack import ASR_RATE, VoiceStack

CAPABILITIES = Capabilities(streaming=True, realtime=True, duplex=True, audio_in=True, audio_out=True)


class StackEngine(Engine):
    """An engine whose models are a ``VoiceStack`` it builds in ``load``: its roles are voice models
    over the stack and turn-based chat over those (the cascade, the pipeline)."""

    capabilities = CAPABILITIES

    def __init__(self) -> None:
        self._stack: VoiceStack | None = None
        self._voice: VoiceModels | None = None
        self._chat: CascadeChat | None = None

    def _loaded(self, stack: VoiceStack, voice: VoiceModels) -> None:
        self._stack, self._voice = stack, voice
        self._chat = CascadeChat(stack, voice)
        self.voices = stack.tts.voices

    @property
    def stack(self) -> VoiceStack:
        """The loaded models."""
        if self._stack is None:
            raise RuntimeError(f"the {self.name} engine is not loaded yet")
        return self._stack

    @property
    def voice(self) -> VoiceModels | None:
        return self._voice

    @property
    def chat(self) -> ChatModel | None:
        return self._chat

    def end_session(self) -> None:
        if self._stack is not None:
            self._stack.end_session()

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()


class CascadeEngine(StackEngine):
    name = "cascade"
    loads = 0  # voice stacks built in this process (a worker builds exactly one)

    def __init__(self, build_stack: Callable[[], VoiceStack]) -> None:
        super().__init__()
        self._build = build_stack

    def load(self) -> None:
        stack = self._build()
        CascadeEngine.loads += 1
        self._loaded(stack, stack)  # voice sessions hear and answer with the models themselves


class CascadeChat(ChatModel):
    """Turn-based streaming over voice models: ``stack`` transcribes audio parts (its ASR) and
    says how long replies may be; ``voice`` replies (the stack itself, or a pipeline's stages)."""

    def __init__(self, stack: VoiceStack, voice: VoiceModels) -> None:
        self.stack = stack
        self.voice = voice
        self._messages: list[ChatMessage] = []  # as the client sent them
        self._texts: list[ChatMessage] = []  # what the LLM sees: audio transcribed

    def reset(self) -> None:
        self._messages = []
        self._texts = []

    def prefill(self, messages: list[ChatMessage]) -> PrefillStats:
        # everything is transcribed first, so a bad audio part changes nothing
        converted = [self._as_text(m) for m in messages]
        cached = history_tokens(self._texts)
        self._messages.extend(m.model_copy(deep=True) for m in messages)
        self._texts.extend(text for text, _ in converted)
        total = history_tokens(self._texts)
        heard = tuple(t for _, transcripts in converted for t in transcripts)
        return PrefillStats(total, len(self._messages), cached, total - cached, heard)

    def generate(
        self, params: GenerateParams, stop: threading.Event, result: GenResult
    ) -> Iterator[GenChunk]:
        if not any(m.role == "user" for m in self._texts):
            raise PrefillRequired("nothing to answer: prefill a user message first")
        said: list[str] = []
        request = ReplyRequest(
            self._llm_messages(params), self._llm_params(params), params.generate_audio, params.voice
        )
        try:
            for piece in self.voice.reply(request, stop):
                if isinstance(piece, Word):
                    said.append(piece.text)
                    yield GenChunk(text_delta=piece.text, tokens=1)
                elif isinstance(piece, Spoken):
                    yield GenChunk(audio=piece.audio)
        finally:
            # the reply as the client received it (cut short or not) joins the history
            reply = "".join(said).strip()
            result.text = reply
            result.generated_tokens = len(said)
            result.stopped = stop.is_set()
            self._messages.append(ChatMessage(role="assistant", content=reply))
            self._texts.append(ChatMessage(role="assistant", content=reply))

    @property
    def kv_length(self) -> int:
        return history_tokens(self._texts)

    def held_messages(self) -> list[ChatMessage]:
        return list(self._messages)

    # ---- internals

    def _as_text(self, message: ChatMessage) -> tuple[ChatMessage, list[str]]:
        """The message with its audio parts replaced by what the ASR heard in them."""
        if isinstance(message.content, str):
            return message, []
        parts: list[TextPart | ImagePart] = []
        heard: list[str] = []
        for part in message.content:
            if isinstance(part, AudioPart):
                transcript = self._transcribe(part)
                heard.append(transcript)
                if transcript:
                    parts.append(TextPart(text=transcript))
            elif isinstance(part, ImagePart):
                if self.stack.llm.vision:
                    parts.append(part)
            else:
                parts.append(part)
        texts = [p for p in parts if isinstance(p, TextPart)]
        if len(texts) == len(parts):
            return ChatMessage(role=message.role, content=" ".join(p.text for p in texts)), heard
        return ChatMessage(role=message.role, content=parts), heard

    def _transcribe(self, part: AudioPart) -> str:
        audio = decode_clip_at(part.data, part.format, part.sample_rate, ASR_RATE)
        asr = self.stack.asr
        if asr.in_utterance:  # a previous failure left one open: it belongs to nobody
            asr.reset()
        return asr.transcribe(audio).text

    def _llm_messages(self, params: GenerateParams) -> list[ChatMessage]:
        stack = self.stack
        history = list(self._texts)
        if stack.system_prompt and not any(m.role == "system" for m in history):
            history.insert(0, ChatMessage(role="system", content=stack.system_prompt))
        return trim_history(history, stack.context_tokens, reserve_tokens=self._max_tokens(params))

    def _llm_params(self, params: GenerateParams) -> LlmParams:
        temperature = params.temperature
        if temperature is None:
            temperature = self.stack.temperature.for_history(self._texts)
        return LlmParams(temperature=temperature, max_tokens=self._max_tokens(params))

    def _max_tokens(self, params: GenerateParams) -> int:
        return min(params.max_new_tokens, self.stack.max_reply_tokens)
