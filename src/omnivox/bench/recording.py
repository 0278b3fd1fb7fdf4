"""The recorder's own cost, in process: CPU and bytes per session-minute of each kind of session.

A minute of each kind is played through a session's recording exactly as the gateway's writer
threads would handle it (the protocol's timeline reader, decoding, chunk files, the journal), then
finished (``recording.json``, the merged replay, the omni video). Frames are made up but shaped like
the real ones: a realtime microphone sending 40 ms of PCM16 at 24 kHz with the reply's deltas for
half the time; a duplex microphone sending a second of float32 at 16 kHz per unit with a spoken
result half the time (and, for omni, one 640x480 JPEG camera frame per unit); a turn-based chat
with four spoken questions and spoken replies a minute.

Reported: CPU seconds per session-minute while it records and to finish it, what one core could
record at once by that (the live part), and MB per session-minute (chunks, frames, replays). The
load benchmarks (``bench realtime`` / ``bench duplex --record off on``) measure the same end to end.
"""

from __future__ import annotations

import argparse
import base64
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from omnivox.audio.pcm import float32_to_b64, pcm16_to_b64
from omnivox.bench.table import print_table, write_json
from omnivox.protocol.registry import by_name
from omnivox.recording.session import Outcome, Policy, RecordedSession, SessionRecording
from omnivox.recording.store import RecordingStore, dir_bytes

Frames = Iterator[tuple[float, bool, str]]
KINDS = ("realtime", "duplex", "omni", "streaming")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--minutes", type=float, default=1.0, help="length of each session")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))


def _speech(seconds: float, rate: int, seed: int = 0) -> np.ndarray:
    """Noise shaped like speech: syllable-rate bursts of band-limited noise."""
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    envelope = np.clip(np.sin(2 * np.pi * 4 * np.arange(n) / rate), 0, None)
    return (0.2 * envelope * rng.standard_normal(n)).astype(np.float32)


def realtime(minutes: float) -> Frames:
    mic, reply = _speech(0.04, 24000, 1), _speech(0.04, 24000, 2)
    append = json.dumps({"type": "input_audio_buffer.append", "audio": pcm16_to_b64(mic)})
    for i in range(int(minutes * 1500)):
        t = (i + 1) * 0.04
        yield t, True, append
        turn = int(t // 6)
        if int(t) % 6 == 3 and t % 1 < 0.04:
            yield (
                t,
                False,
                json.dumps({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 1000 * t}),
            )
            yield t, False, json.dumps({"type": "response.created", "response": {"id": f"r{turn}"}})
        if int(t) % 6 >= 3:  # the assistant speaks half of the time
            delta = {
                "type": "response.output_audio.delta",
                "response_id": f"r{turn}",
                "delta": pcm16_to_b64(reply),
            }
            yield t, False, json.dumps(delta)
            if i % 5 == 0:
                yield (
                    t,
                    False,
                    json.dumps({"type": "response.output_audio_transcript.delta", "delta": "word "}),
                )
        if int(t) % 6 == 5 and t % 1 > 0.96:
            yield (
                t,
                False,
                json.dumps({"type": "response.done", "response": {"id": f"r{turn}", "status": "completed"}}),
            )


def duplex(minutes: float, omni: bool = False) -> Frames:
    from omnivox.video.frames import encode_jpeg

    yield 0.0, True, json.dumps({"type": "prepare"})
    reply = pcm16_to_b64(_speech(1.0, 24000, 3))
    yy, xx = np.mgrid[0:480, 0:640]
    for unit in range(int(minutes * 60)):
        t = unit + 1.0
        chunk: dict = {"type": "audio_chunk", "audio_base64": float32_to_b64(_speech(1.0, 16000, unit))}
        if omni:  # a camera-like picture: gradients, a moving shape and sensor noise
            frame = np.stack([(xx + 7 * unit) % 256, (yy + 3 * unit) % 256, (xx + yy) // 5 % 256], -1)
            noise = np.random.default_rng(unit).integers(0, 12, frame.shape)
            chunk["frame_base64_list"] = [
                base64.b64encode(encode_jpeg((frame + noise).astype(np.uint8))).decode()
            ]
        yield t, True, json.dumps(chunk)
        speak = unit % 6 >= 3
        result = {
            "type": "result", "unit_index": unit, "is_listen": not speak, "text": "word " if speak else "",
            "audio_data": reply if speak else None, "end_of_turn": unit % 6 == 5, "current_time": t,
            "cost_prefill_ms": 50, "cost_generate_ms": 50, "cost_finalize_ms": 1, "wall_clock_ms": 120,
            "kv_cache_length": 1,
        }  # fmt: skip
        yield t + 0.12, False, json.dumps(result)


def streaming(minutes: float) -> Frames:
    question = pcm16_to_b64(_speech(3.0, 16000, 4))
    history: list[dict] = []
    for turn in range(int(minutes * 4)):
        t = 15.0 * turn + 3.0
        history.append(
            {"role": "user", "content": [{"type": "audio", "data": question, "sample_rate": 16000}]}
        )
        yield t, True, json.dumps({"type": "prefill", "messages": history})
        heard = {"prompt_length": 1, "message_count": 1, "cached_tokens": 0, "input_tokens": 1}
        yield t + 0.3, False, json.dumps({"type": "prefill_done", **heard, "transcript": "a question"})
        for i in range(5):  # five seconds of spoken reply, a second a chunk
            chunk = {
                "type": "chunk",
                "chunk_index": i,
                "text_delta": "word ",
                "audio_data": pcm16_to_b64(_speech(1.0, 24000, i)),
            }
            yield t + 0.4 + 0.05 * i, False, json.dumps(chunk)
        yield t + 0.7, False, json.dumps({"type": "done", "elapsed_ms": 400.0, "text": "words"})
        history.append({"role": "assistant", "content": "words"})


SOURCES = {
    "realtime": ("realtime", realtime),
    "duplex": ("duplex", duplex),
    "omni": ("duplex", lambda m: duplex(m, omni=True)),
    "streaming": ("streaming", streaming),
}


def measure(kind: str, minutes: float, root: Path) -> dict[str, float]:
    protocol, source = SOURCES[kind]
    frames = list(source(minutes))
    info = RecordedSession(f"bench-{kind}", protocol, kind, time.time(), 0.0)
    reader = by_name(protocol).timeline_reader()
    assert reader is not None, f"{protocol} sessions are not recorded"
    rec = SessionRecording(RecordingStore(root), info, reader, Policy(True))
    cpu0 = time.process_time()
    for at, from_client, data in frames:
        rec.frame(at, from_client, data)
    rec.flush()
    live = time.process_time() - cpu0
    rec.finish(Outcome(1000))
    finish = time.process_time() - cpu0 - live
    folder = root / info.session_id
    replays = sum(
        (folder / name).stat().st_size
        for name in ("merged_replay.wav", "merged_replay.mp4")
        if (folder / name).exists()
    )
    total = dir_bytes(folder)
    return {
        "frames_per_min": len(frames) / minutes,
        "live_cpu_s_per_min": live / minutes,
        "finish_cpu_s_per_min": finish / minutes,
        "sessions_per_core": 60 / (live / minutes) if live else float("inf"),
        "mb_per_min": total / 1e6 / minutes,
        "replay_mb_per_min": replays / 1e6 / minutes,
    }


def run(args: argparse.Namespace) -> int:
    results = {}
    with tempfile.TemporaryDirectory(prefix="omnivox-bench-") as scratch:
        for kind in args.kinds:
            results[kind] = measure(kind, args.minutes, Path(scratch))
    names = ("frames_per_min", "live_cpu_s_per_min", "finish_cpu_s_per_min", "sessions_per_core")
    rows = [[k, *(r[n] for n in names), r["mb_per_min"], r["replay_mb_per_min"]] for k, r in results.items()]
    print_table(
        f"The recorder per session-minute ({args.minutes:g} min sessions, in process)",
        [
            "kind",
            "frames/min",
            "CPU s/min live",
            "CPU s/min finish",
            "sessions/core",
            "MB/min",
            "of it replays",
        ],
        rows,
    )
    write_json(args.json, {"recording": results, "minutes": args.minutes})
    return 0
