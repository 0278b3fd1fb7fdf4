"""``omnivox bench voice``: its measuring functions on tiny inputs, and the command end to end.

Only the structure and sanity of the results are checked (RTF positive, at least one stream at real
time for speech this short), never how fast anything is.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from omnivox.bench import voice
from omnivox.cli import run_bench

TEXT = "Hello there, good morning."


@pytest.fixture(scope="module")
def tts():
    from omnivox.voice.tts.hibari import HibariTts

    return HibariTts(seed=0)


@pytest.fixture(scope="module")
def make_asr():
    from omnivox.voice.asr.pocketsphinx_asr import PocketsphinxAsr

    return lambda: PocketsphinxAsr(16000)


@pytest.fixture(scope="module")
def audio(tts) -> np.ndarray:
    return voice.speech_16k(tts, TEXT)


def test_speech_is_16k_with_padding_and_pieces_rebuild_the_text(tts, audio):
    assert audio.dtype == np.float32
    assert 1.0 < len(audio) / 16000 < 4.0
    assert np.max(np.abs(audio[:1000])) < 1e-3  # the leading silence
    pieces = voice.llm_pieces(TEXT + "  And more.")
    assert pieces[0] == "Hello " and "".join(pieces) == TEXT + "  And more."
    chunks = voice.frames(audio, 16000, 20.0)
    assert all(len(c) == 320 for c in chunks[:-1]) and sum(map(len, chunks)) == len(audio)


def test_measure_asr_one_stream(make_asr, audio):
    r = voice.measure_asr(make_asr(), audio, 20.0, reference=TEXT)
    assert r["audio_s"] == pytest.approx(len(audio) / 16000)
    assert r["rtf"] > 0 and r["process_s"] > 0
    assert r["streams_per_core"] == pytest.approx(1 / r["rtf"]) and r["streams_per_core"] >= 1
    assert r["partials"] >= 1  # partials were computed frame by frame
    assert r["text"] and 0 <= r["wer"] <= 1.0


def test_measure_asr_streams_finds_the_boundary(make_asr, audio):
    made = []

    def make():
        made.append(make_asr())
        return made[-1]

    r = voice.measure_asr_streams(make, audio, start=1, max_streams=2)
    assert 0 <= r["streams"] <= 2  # 0: not even one stream keeps up on this (loaded) machine
    assert len(made) == max(t["streams"] for t in r["trials"])  # decoders are reused across trials
    ks = [t["streams"] for t in r["trials"]]
    assert ks == sorted(ks) and ks[0] == 1
    for t in r["trials"]:
        assert t["process_s"] > 0 and t["load"] == pytest.approx(t["process_s"] / r["audio_s"])
        # a trial fits exactly when its load is under one; the answer is the largest that fits
        assert (t["load"] < 1) == (t["streams"] <= r["streams"])


def test_measure_tts_word_by_word(tts):
    r = voice.measure_tts(tts, TEXT, repeats=2)
    assert r["words"] == 4
    assert r["audio_s"] > 0.5 and r["rtf"] > 0
    assert 0 < r["first_audio_ms"] / 1e3 <= r["total_s"]
    assert r["rtf"] == pytest.approx(r["total_s"] / r["audio_s"])


def test_measure_vad(audio):
    from omnivox.voice.vad.silero import SileroVad

    r = voice.measure_vad(SileroVad(16000), audio, windows=200)  # more than the clip holds: it repeats
    assert r["windows"] == 200 and r["window_ms"] == 32.0
    assert r["mean_us"] > 0 and r["p99_us"] > 0
    assert r["rt_fraction"] == pytest.approx(r["mean_us"] / 32000)


def test_command_prints_tables_and_writes_json(tmp_path: Path, capsys):
    out = tmp_path / "voice.json"
    argv = ["--asr-text", TEXT, "--short-text", "Hi there.", "--long-text", TEXT + " " + TEXT]
    argv += ["--repeats", "1", "--max-streams", "2", "--vad-windows", "20", "--json", str(out)]
    assert run_bench("voice", argv) == 0
    printed = capsys.readouterr().out
    for title in ("ASR pocketsphinx", "ASR concurrent streams", "TTS hibari", "VAD silero"):
        assert title in printed
    result = json.loads(out.read_text())
    assert result["bench"] == "voice" and result["machine"]
    assert set(result["tts"]) == {"short", "long"}
    assert result["tts"]["long"]["words"] == 8
    assert result["asr"]["rtf"] > 0 and 0 <= result["asr_streams"]["streams"] <= 2  # (0 under load)
    assert result["asr_streams"]["trials"]
    assert result["vad"]["windows"] == 20


def test_frames_cut_audio_in_order_with_a_short_last_frame():
    audio = np.arange(50, dtype=np.float32)
    cut = voice.frames(audio, 1000, 20.0)  # 20 samples a frame
    assert [len(f) for f in cut] == [20, 20, 10]
    assert np.array_equal(np.concatenate(cut), audio)
    assert voice.frames(np.zeros(0, np.float32), 16000, 20.0) == []
    assert [len(f) for f in voice.frames(audio[:3], 16000, 0.001)] == [1, 1, 1]  # never a 0-sample step


def test_llm_pieces_are_words_with_their_trailing_space():
    assert voice.llm_pieces("Hello there,  friend.\n") == ["Hello ", "there,  ", "friend.\n"]
    assert voice.llm_pieces("  lead") == ["lead"]  # leading space belongs to no word
    assert voice.llm_pieces("") == []
