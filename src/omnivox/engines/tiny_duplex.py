"""The tiny engine's full-duplex mode: MiniCPM-o's per-unit KV path on a random model, on a CPU.

A second small random Qwen2 (its own weights, so the text model and its seeded replies are
untouched) over the text codec's vocabulary plus the duplex specials, and two seeded projections
that turn what a unit hears and sees into embeddings:

- audio: log energies in 16 bands of each 100 ms frame (1600 samples at 16 kHz), one embedding
  per frame;
- vision: the unit's latest frame, area-averaged to 32x32 and cut into 16 patches of 8x8 RGB, one
  embedding per patch (plus a seeded patch-position embedding).

A unit's prefill feeds ``<unit>``, the patches, then the audio as ``inputs_embeds`` onto one
``DynamicCache`` and keeps the last logits; generate decides listen or speak from them and speaks
printable bytes; finalize feeds what generate left unfed (the decision or last byte and the chunk
terminator, so a listen unit's generate runs no forward at all) and trims the cache to
``max_kv_tokens``. The trim drops whole units from the middle, keeping the system prompt, while
positions keep counting up: the cache then holds fewer entries than the next token's position, so
every forward passes its position ids explicitly.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import torch

from omnivox.core.errors import InvalidAudio, InvalidMessage, PrefillRequired
from omnivox.engines.base import OUTPUT_SAMPLE_RATE
from omnivox.engines.duplex import INPUT_SAMPLE_RATE, DuplexModel, DuplexParams, DuplexReady, DuplexUnit
from omnivox.voice.llm.byte_codec import VOCAB_SIZE, ByteChatCodec, tiny_qwen2_config
from omnivox.voice.llm.causal_lm import cache_argument, forward_params, new_cache

# The text codec's ids (bytes 0-255, role markers 256-259), then the duplex specials.
UNIT, LISTEN, SPEAK, CHUNK_END, TURN_END = range(VOCAB_SIZE, VOCAB_SIZE + 5)
DUPLEX_VOCAB_SIZE = VOCAB_SIZE + 5
TERMINATORS = frozenset({CHUNK_END, TURN_END})
SPEAKABLE = (*range(0x20, 0x7F), CHUNK_END, TURN_END)  # printable ASCII survives JSON unchanged

AUDIO_FRAME = INPUT_SAMPLE_RATE // 10  # 100 ms: one audio embedding
AUDIO_BANDS = 16
# Log-spaced band edges over the 801 rfft bins of a frame (10 Hz apart), from 40 Hz to 8 kHz.
_BAND_EDGES = np.geomspace(4, AUDIO_FRAME // 2 + 1, AUDIO_BANDS + 1).astype(int)
IMAGE_SIDE = 32  # frames are area-averaged to this square
PATCH = 8  # side of a patch: (32 / 8)^2 = 16 patches of 8 * 8 * 3 values
MAX_FRAMES = 1  # frames seen per unit (the latest), which bounds a unit's cost
TONE_SAMPLES = OUTPUT_SAMPLE_RATE * 40 // 1000  # the "vocoder": 40 ms of tone per byte said
DEFAULT_MAX_KV_TOKENS = 4096  # about 80 units of speech
MIN_WINDOW = 64  # tokens past the system prompt that max_kv_tokens must leave (about one unit)


class TinyDuplexModel:
    """The weights: a random Qwen2 over the duplex vocabulary and the two input projections."""

    def __init__(
        self,
        seed: int,
        *,
        hidden_size: int = 64,
        num_layers: int = 2,
        num_heads: int = 4,
        dtype: torch.dtype = torch.float64,
        device: str = "cpu",
    ) -> None:
        from transformers import Qwen2ForCausalLM

        config = tiny_qwen2_config(DUPLEX_VOCAB_SIZE, hidden_size, num_layers, num_heads)
        patches = (IMAGE_SIDE // PATCH) ** 2
        with torch.random.fork_rng(devices=[]):  # never shift anyone else's random stream
            torch.manual_seed(seed)
            self.lm = Qwen2ForCausalLM(config).to(device=device, dtype=dtype).eval()  # type: ignore[call-arg]  # transformers' wrapped .to
            # Scaled so an input embedding is about as large as a token's (std 0.2).
            self.audio_w = _randn((AUDIO_BANDS, hidden_size), dtype, device) * (0.2 / math.sqrt(AUDIO_BANDS))
            self.audio_b = _randn((hidden_size,), dtype, device) * 0.2
            values = 3 * PATCH * PATCH  # each about uniform in -0.5..0.5: variance 1/12
            self.patch_w = _randn((values, hidden_size), dtype, device) * (0.2 / math.sqrt(values / 12))
            self.patch_pos = _randn((patches, hidden_size), dtype, device) * 0.2
        self.dtype = dtype
        self.device = torch.device(device)
        self._cache_arg = cache_argument(self.lm)
        self._logits_to_keep = "logits_to_keep" in forward_params(self.lm)

    def new_cache(self) -> Any:
        return new_cache(self.lm)

    def embed_tokens(self, ids: list[int]) -> torch.Tensor:
        return self.lm.get_input_embeddings()(torch.tensor(ids, device=self.device))

    def embed_audio(self, audio: np.ndarray) -> torch.Tensor:
        """One embedding per started 100 ms of 16 kHz audio (the last frame zero-padded)."""
        features = torch.from_numpy(audio_features(audio)).to(device=self.device, dtype=self.dtype)
        return features @ self.audio_w + self.audio_b

    def embed_frame(self, frame: np.ndarray) -> torch.Tensor:
        """One embedding per 8x8 patch of the frame scaled to 32x32 (16 embeddings)."""
        return frame_patches(frame, self.dtype).to(self.device) @ self.patch_w + self.patch_pos

    def forward(self, embeds: torch.Tensor, start: int, cache: Any) -> torch.Tensor:
        """Run ``embeds`` at positions ``start``... onto ``cache``; the last position's logits."""
        kwargs: dict[str, Any] = {self._cache_arg: cache}
        if self._logits_to_keep:
            kwargs["logits_to_keep"] = 1
        positions = torch.arange(start, start + embeds.shape[0], device=self.device).unsqueeze(0)
        out = self.lm(inputs_embeds=embeds.unsqueeze(0), position_ids=positions, use_cache=True, **kwargs)
        return out.logits[0, -1]


class TinyDuplex(DuplexModel):
    """One duplex session at a time over a ``TinyDuplexModel`` (the tiny engine's ``duplex`` role)."""

    def __init__(self, model: TinyDuplexModel, seed: int) -> None:
        self.model = model
        self._seed = seed  # sampling seed when the session names none
        self._speakable = torch.tensor(SPEAKABLE, device=model.device)
        self._clear()

    def _clear(self) -> None:
        self.params: DuplexParams | None = None
        self.pending_logits: torch.Tensor | None = None  # the last prefill's, for generate
        self._cache: Any = None
        self._position = 0  # of the next token fed: never goes back, trimmed or not
        self._prefix = 0  # cache entries of the system prompt (and reference audio): never trimmed
        self._unit_starts: list[int] = []  # cache index of each held unit's <unit>
        self._unfed: list[int] = []  # what generate chose and finalize feeds
        self._rng: torch.Generator | None = None

    @property
    def active(self) -> bool:
        return self.params is not None

    @property
    def kv_length(self) -> int:
        return int(self._cache.get_seq_length()) if self._cache is not None else 0

    # ---- the duplex methods

    @torch.inference_mode()
    def prepare(self, params: DuplexParams) -> DuplexReady:
        self._clear()
        system = [{"role": "system", "content": params.system_prompt}]
        prefix = [self.model.embed_tokens(ByteChatCodec().encode_chat(system, add_generation_prompt=False))]
        if params.ref_audio is not None:  # the model's own voice prompt, as MiniCPM-o puts it
            prefix.append(self.model.embed_audio(check_audio(params.ref_audio, "ref_audio")))
        limit = params.max_kv_tokens or DEFAULT_MAX_KV_TOKENS
        held = sum(len(p) for p in prefix)
        if limit < held + MIN_WINDOW:
            raise InvalidMessage(
                f"max_kv_tokens {limit} leaves no room: the system prompt alone takes {held} tokens "
                f"and a unit needs about {MIN_WINDOW}",
                field="max_kv_tokens",
            )
        self._cache = self.model.new_cache()
        self._rng = torch.Generator(device=self.model.device)
        self._rng.manual_seed(params.seed if params.seed is not None else self._seed)
        self._feed(torch.cat(prefix))
        self._prefix = self.kv_length
        self.params = params
        notes = []
        if params.voice or params.tts_ref_audio is not None:
            notes.append("the tiny engine speaks in tones, one per byte: voice and tts_ref_audio are ignored")
        return DuplexReady(vision=True, notes=tuple(notes))

    @torch.inference_mode()
    def prefill(self, audio: np.ndarray, frames: list[np.ndarray]) -> None:
        self._session()
        audio = check_audio(audio, "audio")
        frames = check_frames(frames)[-MAX_FRAMES:]
        if self._unfed:  # the caller skipped finalize: close the last unit first
            self.finalize()
        parts = [self.model.embed_tokens([UNIT])]
        parts.extend(self.model.embed_frame(f) for f in frames)
        parts.append(self.model.embed_audio(audio))
        self._unit_starts.append(self.kv_length)
        self.pending_logits = self._feed(torch.cat(parts))

    @torch.inference_mode()
    def generate(self, force_listen: bool) -> DuplexUnit:
        params = self._session()
        logits = self.pending_logits
        if logits is None:
            raise PrefillRequired("generate needs this unit's prefill first")
        self.pending_logits = None
        if force_listen or self._decide(logits, params) == LISTEN:
            self._unfed = [LISTEN]
            return DuplexUnit(is_listen=True)
        said, terminator = self._speak(params)
        audio = speak_tones(said) if params.generate_audio and said else None
        return DuplexUnit(
            is_listen=False,
            text=bytes(said).decode("ascii"),
            audio=audio,
            end_of_turn=terminator == TURN_END,
            tokens=len(said),
        )

    @torch.inference_mode()
    def finalize(self) -> None:
        if self._cache is None:
            return
        if self._unfed:
            ids, self._unfed = self._unfed, []
            self._feed(self.model.embed_tokens(ids))
        self._trim()

    def cleanup(self) -> None:
        self._clear()

    # ---- internals

    def _session(self) -> DuplexParams:
        if self.params is None:
            raise PrefillRequired("no duplex session: prepare one first")
        return self.params

    def _feed(self, embeds: torch.Tensor) -> torch.Tensor:
        try:
            logits = self.model.forward(embeds, self._position, self._cache)
        except BaseException:
            self._clear()  # a forward that fails part-way leaves layers of different lengths
            raise
        self._position += embeds.shape[0]
        return logits

    def _decide(self, logits: torch.Tensor, params: DuplexParams) -> int:
        """LISTEN or SPEAK: the two-way distribution with P(listen) scaled by listen_prob_scale.

        Greedy decoding (temperature 0) takes the argmax of the scaled temperature-1 distribution,
        so the scale biases greedy sessions too.
        """
        greedy = params.temperature <= 0
        scores = logits[[LISTEN, SPEAK]] / (1.0 if greedy else params.temperature)
        scale = min(max(params.listen_prob_scale, 1e-300), 1e300)  # 0 and inf stay finite
        scores = torch.log_softmax(scores, dim=-1) + scores.new_tensor([math.log(scale), 0.0])
        return (LISTEN, SPEAK)[self._pick(scores, params, greedy)]

    def _speak(self, params: DuplexParams) -> tuple[list[int], int | None]:
        """Feed <speak>, then pick up to max_new_speak_tokens; the bytes said and the terminator."""
        logits = self._feed(self.model.embed_tokens([SPEAK]))
        said: list[int] = []
        terminator = None
        greedy = params.temperature <= 0
        for _ in range(params.max_new_speak_tokens):
            if said:  # fed lazily: the last pick of a unit is fed by finalize, after the result is out
                logits = self._feed(self.model.embed_tokens(said[-1:]))
            scores = logits[self._speakable] / (1.0 if greedy else params.temperature)
            token = SPEAKABLE[self._pick(scores, params, greedy)]
            if token in TERMINATORS:
                terminator = token
                break
            said.append(token)
        self._unfed = [terminator] if terminator is not None else [*said[-1:], CHUNK_END]
        return said, terminator

    def _pick(self, scores: torch.Tensor, params: DuplexParams, greedy: bool) -> int:
        if greedy:
            return int(torch.argmax(scores))
        return sample(scores, params.top_k, params.top_p, self._rng)

    def _trim(self) -> None:
        """Hold at most max_kv_tokens: drop the oldest whole units after the system prompt (into a
        unit only when the newest alone is too long), so the window still starts at a <unit>."""
        assert self.params is not None
        excess = self.kv_length - (self.params.max_kv_tokens or DEFAULT_MAX_KV_TOKENS)
        if excess <= 0:
            return
        cut = next((s for s in self._unit_starts if s - self._prefix >= excess), self._prefix + excess)
        drop_span(self._cache, self._prefix, cut)
        dropped = cut - self._prefix
        self._unit_starts = [s - dropped for s in self._unit_starts if s >= cut]


def sample(scores: torch.Tensor, top_k: int, top_p: float, rng: torch.Generator | None) -> int:
    """An index drawn from softmax(scores) after top-k, then top-p (nucleus) filtering."""
    probs = torch.softmax(scores.double(), dim=-1)
    if 0 < top_k < probs.numel():
        probs = torch.where(probs >= torch.topk(probs, top_k).values[-1], probs, 0.0)
    if 0 < top_p < 1:
        ordered, order = torch.sort(probs, descending=True)
        before = torch.cumsum(ordered, dim=-1) - ordered  # mass of the likelier ones
        keep = torch.zeros_like(probs, dtype=torch.bool)
        keep[order] = before < top_p * ordered.sum()  # the first always stays
        probs = torch.where(keep, probs, 0.0)
    return int(torch.multinomial(probs, 1, generator=rng))


def drop_span(cache: Any, start: int, end: int) -> None:
    """Remove cache entries ``start:end`` from every layer's keys and values."""
    if end <= start:
        return
    for layer in cache.layers:  # transformers >= 4.56: one cache layer object per model layer
        if getattr(layer, "is_sliding", False):
            raise RuntimeError("a sliding-window cache layer cannot drop from its middle")
        layer.keys = torch.cat((layer.keys[..., :start, :], layer.keys[..., end:, :]), dim=-2)
        layer.values = torch.cat((layer.values[..., :start, :], layer.values[..., end:, :]), dim=-2)


def check_audio(audio: Any, name: str) -> np.ndarray:
    """Mono 16 kHz float samples, at least one, all finite; else ``InvalidAudio``."""
    if not isinstance(audio, np.ndarray) or audio.ndim != 1 or not np.issubdtype(audio.dtype, np.floating):
        shape = getattr(audio, "shape", None)
        raise InvalidAudio(f"{name} must be mono float samples (a 1-D array)", shape=str(shape))
    if audio.size == 0:
        raise InvalidAudio(f"{name} is empty")
    if not np.isfinite(audio).all():
        raise InvalidAudio(f"{name} holds NaN or infinite samples")
    return audio


def check_frames(frames: Any) -> list[np.ndarray]:
    """RGB uint8 frames, height x width x 3; else ``InvalidMessage`` naming the frame."""
    frames = list(frames or ())
    for i, frame in enumerate(frames):
        ok = isinstance(frame, np.ndarray) and frame.dtype == np.uint8 and frame.ndim == 3
        if not ok or frame.shape[2] != 3 or frame.shape[0] == 0 or frame.shape[1] == 0:
            shape = str(getattr(frame, "shape", None))
            raise InvalidMessage(f"frame {i} must be RGB uint8, height x width x 3", index=i, shape=shape)
    return frames


def audio_features(audio: np.ndarray) -> np.ndarray:
    """Log band energies, one row of ``AUDIO_BANDS`` per started 100 ms frame, about -1..1."""
    frames = -(-audio.size // AUDIO_FRAME)
    padded = np.zeros(frames * AUDIO_FRAME)
    padded[: audio.size] = audio
    power = np.abs(np.fft.rfft(padded.reshape(frames, AUDIO_FRAME), axis=1)) ** 2 / AUDIO_FRAME
    bands = np.add.reduceat(power, _BAND_EDGES[:-1], axis=1)[:, :AUDIO_BANDS] / np.diff(_BAND_EDGES)
    return (np.log10(bands + 1e-10) + 5.0) / 5.0  # silence -1, loud speech about 1


def frame_patches(frame: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """The frame area-averaged to 32x32, as 16 rows of 8x8x3 values in -0.5..0.5."""
    step = max(1, min(frame.shape[:2]) // (IMAGE_SIDE * 4))  # subsample big frames first: cheap
    x = torch.from_numpy(np.ascontiguousarray(frame[::step, ::step])).to(dtype).permute(2, 0, 1)
    x = torch.nn.functional.adaptive_avg_pool2d(x.unsqueeze(0), IMAGE_SIDE)[0] / 255.0 - 0.5
    grid = IMAGE_SIDE // PATCH
    return x.reshape(3, grid, PATCH, grid, PATCH).permute(1, 3, 0, 2, 4).reshape(grid * grid, -1)


def speak_tones(said: list[int]) -> np.ndarray:
    """24 kHz float32 audio for the bytes said: a 40 ms tone per byte, its pitch the byte's."""
    return np.concatenate([_tone(b) for b in said])


@functools.cache
def _tone(byte: int) -> np.ndarray:
    n = np.arange(TONE_SAMPLES)
    t = n / OUTPUT_SAMPLE_RATE
    fade = np.minimum(1.0, np.minimum(n, TONE_SAMPLES - 1 - n) / 48)  # 2 ms ramps
    tone = 0.2 * np.sin(2 * np.pi * (200.0 + 8.0 * (byte - 0x20)) * t) * fade  # no clicks at the joins
    tone = tone.astype(np.float32)
    tone.flags.writeable = False  # shared by every unit that says this byte
    return tone


def _randn(shape: tuple[int, ...], dtype: torch.dtype, device: str) -> torch.Tensor:
    return torch.randn(shape, dtype=dtype).to(device)
