"""bench kv without a model or a cluster: the conversation it measures (on the echo engine), its
summary and exit code, and how it names each engine."""

from __future__ import annotations

import argparse
import json

import pytest

from omnivox.bench import kv
from omnivox.engines.base import GenerateParams
from omnivox.engines.echo import EchoEngine


def kv_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    kv.add_arguments(parser)
    parser.add_argument("--json")
    return parser.parse_args(list(argv))


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
