"""KV-cache reuse across turns: the tiny engine (a real transformer and DynamicCache) and the local
engine (the embedded SmolLM2-135M GGUF on llama.cpp, whose slot keeps the conversation)."""

from __future__ import annotations

import httpx
import pytest

from cluster import cluster
from wsclient import StreamingClient


@pytest.mark.parametrize("engine", ["tiny", "local"])
async def test_three_turns_reuse_cache_and_match_full_prefill(tmp_path, engine):
    with cluster(workers=2, engine=engine, log_dir=tmp_path) as c:
        messages = [{"role": "system", "content": "You are tiny."}]
        turns = []
        async with StreamingClient(c.ws, "conv") as cl:
            for text in ("hello there", "tell me more", "and then?"):
                messages.append({"role": "user", "content": text})
                result = await cl.turn(messages, max_new_tokens=24)
                assert result["done"]["type"] == "done", result["messages"]
                turns.append(result)
                messages.append({"role": "assistant", "content": result["text"]})
        first, *later = turns
        assert first["prefill_done"]["cached_tokens"] == 0 and not first["prefill_done"]["cache_hit"]
        for t in later:
            assert t["prefill_done"]["cache_hit"] is True
            assert t["prefill_done"]["cached_tokens"] > 0
            # only the new user message was computed, not the history
            assert t["prefill_done"]["input_tokens"] < t["prefill_done"]["cached_tokens"]
            assert t["prefill_done"]["worker_id"] == first["prefill_done"]["worker_id"]
        assert all(t["text"] for t in turns)

        # replay turn 3 from scratch: no worker holds that history now, so it is a full prefill on
        # the other (empty) worker, and greedy decoding must give exactly the same reply
        async with StreamingClient(c.ws, "replay") as cl:
            replay = await cl.turn(messages[:-1], max_new_tokens=24)
        assert replay["prefill_done"]["cache_hit"] is False
        assert replay["prefill_done"]["cached_tokens"] == 0
        assert replay["prefill_done"]["worker_id"] != first["prefill_done"]["worker_id"]
        assert replay["text"] == turns[2]["text"]
        assert (
            replay["done"]["token_stats"]["generated_tokens"]
            == turns[2]["done"]["token_stats"]["generated_tokens"]
        )

        metrics = httpx.get(c.url + "/metrics").text
        assert "omnivox_cache_hits_total 2.0" in metrics
        assert "omnivox_cache_misses_total 2.0" in metrics
        assert 'omnivox_time_to_first_token_seconds_count{cache="hit"} 2.0' in metrics
