"""bench kv, pool and turns without their models or a cluster: the conversation kv measures (on the
echo engine), its summary and exit code, the pool's in-process figures, and the turn benchmark's
audio helpers."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from omnivox.bench import kv, pool, turns
from omnivox.engines.base import GenerateParams
from omnivox.engines.echo import EchoEngine
from omnivox.voice.listener import Heard


def kv_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    kv.add_arguments(parser)
    parser.add_argument("--json")
    return parser.parse_args(list(argv))


# ---- kv: messages and the conversation


def test_user_messages_have_the_asked_length_and_differ_per_turn():
    a, b = kv.user_message(0, 50), kv.user_message(1, 50)
    assert a.role == b.role == "user"
    assert a.content.startswith("Turn 1: ") and b.content.startswith("Turn 2: ")
    assert len(a.content) == len("Turn 1: ") + 50
    assert a.content[8:] != b.content[8:]
    assert kv.user_message(3, 80) == kv.user_message(3, 80)  # the same turn, the same words


def test_a_timed_turn_gives_a_first_token_time_the_stats_and_the_reply():
    engine = EchoEngine()
    seconds, stats, reply = kv.timed_turn(engine, [kv.user_message(0, 30)], GenerateParams(max_new_tokens=8))
    assert seconds >= 0 and stats.input_tokens > 0 and stats.prompt_length == stats.input_tokens
    assert reply.startswith("(echo) Turn 1: the quick")  # the echo engine says the words back


def test_the_conversation_hits_the_cache_after_its_first_turn():
    args = kv_args("--turns", "4", "--user-chars", "40")
    out = kv.conversation(EchoEngine(), args, GenerateParams(max_new_tokens=8, temperature=0.0))
    assert [t["turn"] for t in out] == [1, 2, 3, 4]
    assert all(t["same_reply"] for t in out)  # echo answers the same on both paths
    prompts = [t["prompt_tokens"] for t in out]
    assert prompts == sorted(prompts) and len(set(prompts)) == 4  # the conversation grows
    assert out[0]["hit_computed_tokens"] == out[0]["prompt_tokens"]  # nothing to reuse yet
    for t in out[1:]:
        assert 0 < t["hit_computed_tokens"] < t["prompt_tokens"]  # only the new message is computed
    assert all(t["ttft_hit_ms"] >= 0 and t["ttft_miss_ms"] >= 0 for t in out)


def test_summary_leaves_out_the_first_turn_and_compares_the_last():
    rows = [
        {"ttft_hit_ms": 100.0, "ttft_miss_ms": 100.0, "same_reply": True},
        {"ttft_hit_ms": 10.0, "ttft_miss_ms": 40.0, "same_reply": True},
        {"ttft_hit_ms": 20.0, "ttft_miss_ms": 80.0, "same_reply": True},
        {"ttft_hit_ms": 30.0, "ttft_miss_ms": 150.0, "same_reply": True},
    ]
    s = kv.summarize(rows)
    assert s == {
        "median_ttft_hit_ms": 20.0,
        "median_ttft_miss_ms": 80.0,
        "last_turn_ratio": 5.0,
        "replies_agree": True,
    }
    rows[2]["same_reply"] = False
    assert kv.summarize(rows)["replies_agree"] is False


def test_summary_of_one_turn_uses_that_turn():
    s = kv.summarize([{"ttft_hit_ms": 4.0, "ttft_miss_ms": 8.0, "same_reply": True}])
    assert s["median_ttft_hit_ms"] == 4.0 and s["median_ttft_miss_ms"] == 8.0 and s["last_turn_ratio"] == 2.0


def test_describe_each_engine():
    tiny = kv_args("--float32", "--layers", "2")
    assert kv.describe(tiny, EchoEngine()) == "tiny (hidden 512, 2 layers, 8 heads, float32, cpu)"
    hf = kv_args("--engine", "transformers", "--device", "cuda")
    assert kv.describe(hf, EchoEngine()) == "echo on cuda"
    local = kv_args("--engine", "local", "--no-exact", "--threads", "2")
    assert kv.describe(local, EchoEngine()) == "echo, llama.cpp, 2 thread(s), batched prompts"
    assert "exact (one prompt token per pass)" in kv.describe(kv_args("--engine", "local"), EchoEngine())


def test_transformers_without_a_model_is_refused():
    with pytest.raises(SystemExit, match="--model"):
        kv.build_engine(kv_args("--engine", "transformers"))


def test_a_whole_run_on_the_echo_engine_prints_and_writes_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(kv, "build_engine", lambda args: EchoEngine())
    out = tmp_path / "kv.json"
    args = kv_args("--turns", "3", "--repeats", "2", "--user-chars", "30", "--json", str(out))
    assert kv.run(args) == 0
    printed = capsys.readouterr().out
    assert "KV-cache reuse: tiny" in printed and "median of 2" in printed and "agree" in printed
    data = json.loads(out.read_text())
    assert data["bench"] == "kv" and len(data["turns"]) == 3 and data["summary"]["replies_agree"]


class Forgetful(EchoEngine):
    """An engine whose reply depends on how it got its history: a hit and a miss answer apart."""

    def reset(self) -> None:
        super().reset()
        self.prefills = 0

    def prefill(self, messages):
        self.prefills = getattr(self, "prefills", 0) + 1
        return super().prefill(messages)

    def generate(self, params, stop, result):
        yield from super().generate(params, stop, result)
        result.text += f" ({self.prefills} prefills)"


def test_replies_that_differ_fail_the_run(capsys, monkeypatch):
    monkeypatch.setattr(kv, "build_engine", lambda args: Forgetful())
    args = kv_args("--turns", "3", "--repeats", "1", "--user-chars", "20")
    assert kv.run(args) == 1
    printed = capsys.readouterr().out
    assert "DIFFER" in printed and "NO" in printed


# ---- pool in process


def test_pool_in_process_figures_for_a_small_queue():
    r = pool.in_process(20, 5)
    assert set(r) == {"enqueue_us", "dispatch_us", "snapshot_ms", "bytes_per_ticket"}
    assert r["enqueue_us"] > 0 and r["dispatch_us"] > 0 and r["snapshot_ms"] >= 0
    assert r["bytes_per_ticket"] > 0  # queued tickets take memory


def test_pool_defaults():
    parser = argparse.ArgumentParser()
    pool.add_arguments(parser)
    args = parser.parse_args(["--sizes", "1", "10"])
    assert args.sizes == [1, 10] and args.wire_sizes == [1, 100, 1000, 10000] and args.repeats == 20


# ---- turns: audio helpers and the first stop


def test_trim_cuts_the_quiet_at_both_ends():
    audio = np.zeros(100, np.float32)
    audio[20] = 0.5
    audio[60] = -0.1
    trimmed = turns.trim(audio)
    assert len(trimmed) == 41 and trimmed[0] == 0.5 and trimmed[-1] == pytest.approx(-0.1)


def test_trim_keeps_all_quiet_audio_as_it_is():
    quiet = np.full(50, 0.01, np.float32)  # under the threshold everywhere
    assert turns.trim(quiet) is quiet


def test_quiet_is_silence_at_16k():
    q = turns.quiet(0.25)
    assert q.dtype == np.float32 and len(q) == 4000 and not q.any()


class ScriptedListener:
    """Says ``speech_stopped`` on the n-th frame fed (never, if None); records the frame sizes."""

    def __init__(self, stop_on: int | None) -> None:
        self.stop_on = stop_on
        self.sizes: list[int] = []

    def feed(self, audio: np.ndarray) -> list[Heard]:
        self.sizes.append(len(audio))
        if len(self.sizes) == self.stop_on:
            return [Heard("speech_started"), Heard("speech_stopped")]
        return [Heard("speech_started")] if len(self.sizes) == 1 else []


def test_first_stop_is_the_end_of_the_frame_that_ended_the_turn():
    listener = ScriptedListener(stop_on=3)
    assert turns.first_stop_ms(listener, np.zeros(16000, np.float32)) == 60.0
    assert listener.sizes == [320, 320, 320]  # 20 ms frames, and nothing fed after the stop


def test_first_stop_counts_a_short_last_frame_by_its_length():
    listener = ScriptedListener(stop_on=2)
    assert turns.first_stop_ms(listener, np.zeros(320 + 160, np.float32)) == 30.0


def test_no_stop_is_none():
    listener = ScriptedListener(stop_on=None)
    assert turns.first_stop_ms(listener, np.zeros(1600, np.float32)) is None
    assert len(listener.sizes) == 5


def test_the_deaf_recogniser_hears_nothing():
    deaf = turns._Deaf()
    assert deaf.feed(np.ones(1600, np.float32) * 0.3) is None
    final = deaf.flush()
    assert final.text == "" and final.final and final.words == ()


def test_the_scripted_sets_are_whole_sentences():
    assert len(turns.COMPLETE) == len(turns.PAUSED) == 8
    assert all(t[-1] in ".?" for t in turns.COMPLETE)
    assert all(rest[-1] in ".?" and first[-1] not in ".?" for first, rest in turns.PAUSED)
    assert turns.MODES[0] == "server_vad" and math.isclose(turns.PAUSE_S, 1.0)
