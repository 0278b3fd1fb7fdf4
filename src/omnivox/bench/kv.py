"""Time to first token per turn with KV-cache reuse (hit) vs a reset and full prefill (miss).

Engines: ``tiny`` (a random transformer), ``transformers`` (a local model directory) and ``local``
(the embedded SmolLM2-135M GGUF on llama.cpp; ``--no-exact`` measures batched prompts, as the voice
cascade runs them, and the replies may then part from a full recompute's at a near-tie). For
``local`` the summary adds decode speed and the process's peak memory (model, KV state, Python).

One engine holds a growing conversation. Each turn is measured twice from the moment the worker
would receive the request: as a hit (prefill only the new user message on the held cache, then
generate) and as a forced miss (reset, prefill the whole conversation, then generate). The miss run
also regenerates the reply, so the table says whether both paths gave the same greedy reply.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

from omnivox.bench.table import print_table, write_json
from omnivox.engines.base import ChatModel, Engine, GenerateParams, GenResult
from omnivox.protocol.chat import ChatMessage

_WORDS = (
    "the quick brown fox jumps over a lazy dog while seven tired voices ask about weather, trains, "
    "recipes and the price of coffee in small towns along the river"
).split()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine", choices=("tiny", "transformers", "local"), default="tiny", help="engine to measure"
    )
    parser.add_argument("--threads", type=int, default=1, help="local engine threads")
    parser.add_argument(
        "--exact",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="local engine: one prompt token per pass (replies identical to a full recompute)",
    )
    parser.add_argument("--model", help="local model directory (for --engine transformers)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--turns", type=int, default=10, help="conversation turns to measure")
    parser.add_argument("--user-chars", type=int, default=200, help="length of each user message")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="reply length per turn")
    parser.add_argument("--hidden-size", type=int, default=512, help="tiny engine width")
    parser.add_argument("--layers", type=int, default=6, help="tiny engine depth")
    parser.add_argument("--heads", type=int, default=8, help="tiny engine attention heads")
    parser.add_argument("--float32", action="store_true", help="tiny engine in float32 (default float64)")
    parser.add_argument("--repeats", type=int, default=3, help="passes over the conversation (median kept)")
    parser.add_argument("--seed", type=int, default=0, help="tiny engine weights")


def build_engine(args: argparse.Namespace) -> Engine:
    if args.engine == "local":
        from omnivox.engines.llamacpp import LlamaCppEngine

        return LlamaCppEngine.embedded(threads=args.threads, context_tokens=8192, exact=args.exact)
    if args.engine == "transformers":
        if not args.model:
            raise SystemExit("--engine transformers needs --model PATH")
        from omnivox.engines.hf import TransformersEngine

        return TransformersEngine.from_pretrained(args.model, device=args.device)
    import torch

    from omnivox.engines.tiny import TinyEngine

    return TinyEngine(
        seed=args.seed,
        hidden_size=args.hidden_size,
        num_layers=args.layers,
        num_heads=args.heads,
        dtype=torch.float32 if args.float32 else torch.float64,
        device=args.device,
    )


def user_message(turn: int, chars: int) -> ChatMessage:
    words = [_WORDS[(turn * 7 + i) % len(_WORDS)] for i in range(chars)]
    return ChatMessage(role="user", content=f"Turn {turn + 1}: " + " ".join(words)[:chars])


def timed_turn(
    engine: ChatModel, messages: list[ChatMessage], params: GenerateParams
) -> tuple[float, Any, str]:
    """Prefill ``messages`` and generate; return (seconds to the first token, prefill stats, reply)."""
    start = time.perf_counter()
    stats = engine.prefill(messages)
    first: float | None = None
    result = GenResult()
    for _ in engine.generate(params, threading.Event(), result):
        if first is None:
            first = time.perf_counter() - start
    decode_ms = result.extra.get("decode_ms")
    if decode_ms and result.generated_tokens > 1:
        _SPEEDS.append((result.generated_tokens - 1) * 1000.0 / decode_ms)
    # A reply that ends at once has no chunk; its first token is then the end of generation.
    return (first if first is not None else time.perf_counter() - start), stats, result.text


_SPEEDS: list[float] = []  # decode tokens/s of every generation (engines that report it)


def conversation(engine: ChatModel, args: argparse.Namespace, params: GenerateParams) -> list[dict[str, Any]]:
    """One pass over the whole conversation, from an empty engine; one dict per turn."""
    engine.reset()
    system = ChatMessage(role="system", content="You are a helpful voice assistant. Keep answers short.")
    turns: list[dict[str, Any]] = []
    for turn in range(args.turns):
        new = ([system] if turn == 0 else []) + [user_message(turn, args.user_chars)]
        history = engine.held_messages()
        hit_s, stats, hit_reply = timed_turn(engine, new, params)
        # The miss leaves the engine holding history + new + its own reply: the next hit goes on
        # from there (the same conversation whenever the replies agree).
        engine.reset()
        miss_s, _, miss_reply = timed_turn(engine, history + new, params)
        turns.append(
            {
                "turn": turn + 1,
                "prompt_tokens": stats.prompt_length,
                "hit_computed_tokens": stats.input_tokens,
                "ttft_hit_ms": hit_s * 1e3,
                "ttft_miss_ms": miss_s * 1e3,
                "same_reply": hit_reply == miss_reply,
            }
        )
    return turns


def run(args: argparse.Namespace) -> int:
    """Run the benchmark, print the table and a summary, optionally write JSON; return the exit code."""
    built = build_engine(args)
    engine = built.chat  # the turn-based role is what is measured
    assert engine is not None, f"engine {built.name} has no turn-based chat"
    params = GenerateParams(max_new_tokens=args.max_new_tokens, temperature=0.0)
    # Warm-up: first calls pay for allocator growth and lazy kernel set-up, on both paths.
    timed_turn(engine, [user_message(99, args.user_chars)], params)
    # Whole passes repeated (greedy decoding makes them identical) and the median per turn kept,
    # because a hit cannot be re-measured in place once its tokens are in the cache.
    passes = [conversation(engine, args, params) for _ in range(args.repeats)]
    turns = []
    for per_pass in zip(*passes, strict=True):
        turn = dict(per_pass[0])
        for key in ("ttft_hit_ms", "ttft_miss_ms"):
            turn[key] = statistics.median(t[key] for t in per_pass)
        turn["same_reply"] = all(t["same_reply"] for t in per_pass)
        turns.append(turn)

    columns = [
        "turn",
        "prompt tokens",
        "hit computes",
        "TTFT hit ms",
        "TTFT miss ms",
        "miss/hit",
        "same reply",
    ]
    rows = [
        [
            t["turn"],
            t["prompt_tokens"],
            t["hit_computed_tokens"],
            t["ttft_hit_ms"],
            t["ttft_miss_ms"],
            t["ttft_miss_ms"] / t["ttft_hit_ms"],
            "yes" if t["same_reply"] else "NO",
        ]
        for t in turns
    ]
    print_table(f"KV-cache reuse: {describe(args, built)}, median of {args.repeats}", columns, rows)
    summary = summarize(turns)
    if _SPEEDS:
        import resource

        summary["decode_tokens_per_s"] = statistics.median(_SPEEDS)
        summary["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"\ndecode {summary['decode_tokens_per_s']:.0f} tokens/s (median of {len(_SPEEDS)} replies);"
            f" peak memory of this process {summary['peak_rss_mb']:.0f} MB"
        )
    print(
        f"\nturns 2-{len(turns)} (turn 1 has nothing cached):"
        f" median TTFT hit {summary['median_ttft_hit_ms']:.1f} ms,"
        f" miss {summary['median_ttft_miss_ms']:.1f} ms;"
        f" last turn ({turns[-1]['prompt_tokens']} prompt tokens)"
        f" miss/hit {summary['last_turn_ratio']:.1f}x;"
        f" replies {'agree' if summary['replies_agree'] else 'DIFFER'} on every turn"
    )
    write_json(
        getattr(args, "json", None),
        {"bench": "kv", "engine": describe(args, built), "turns": turns, "summary": summary},
    )
    return 0 if summary["replies_agree"] else 1


def summarize(turns: list[dict[str, Any]]) -> dict[str, Any]:
    later = turns[1:] or turns
    return {
        "median_ttft_hit_ms": statistics.median(t["ttft_hit_ms"] for t in later),
        "median_ttft_miss_ms": statistics.median(t["ttft_miss_ms"] for t in later),
        "last_turn_ratio": turns[-1]["ttft_miss_ms"] / turns[-1]["ttft_hit_ms"],
        "replies_agree": all(t["same_reply"] for t in turns),
    }


def describe(args: argparse.Namespace, engine: Engine) -> str:
    if args.engine == "local":
        mode = "exact (one prompt token per pass)" if args.exact else "batched prompts"
        return f"{engine.name}, llama.cpp, {args.threads} thread(s), {mode}"
    if args.engine == "transformers":
        return f"{engine.name} on {args.device}"
    dtype = "float32" if args.float32 else "float64"
    return (
        f"tiny (hidden {args.hidden_size}, {args.layers} layers, {args.heads} heads, {dtype}, {args.device})"
    )
