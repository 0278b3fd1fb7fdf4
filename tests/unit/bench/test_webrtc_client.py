"""The WebRTC caller's microphone track (clips queued as 20 ms PCM16 frames, silence otherwise, each
clip's end marked) and the refusal it raises, without opening a call."""

from __future__ import annotations

import fractions

import numpy as np
import pytest
from aiortc.mediastreams import MediaStreamError

from omnivox.bench import webrtc_client as wc


def pcm(frame) -> np.ndarray:
    return frame.to_ndarray().reshape(-1)


def test_constants():
    assert wc.FRAME == 480 and wc.RATE == 24000 and 0 < wc.LOUD < 32767


async def test_a_clip_goes_out_in_whole_frames_then_its_end_is_marked():
    mic = wc.ClipTrack()
    assert mic.idle
    mic.play(np.full(wc.FRAME * 2 + 100, 0.25, np.float32))
    assert not mic.idle
    frames = [pcm(await mic.recv()) for _ in range(3)]
    assert [int((f != 0).sum()) for f in frames] == [wc.FRAME, wc.FRAME, 100]  # the last one padded
    assert not mic.clip_ended.is_set() and not mic.idle  # the end marker is still queued
    await mic.recv()
    assert mic.clip_ended.is_set() and mic.idle


async def test_samples_are_clipped_to_pcm16():
    mic = wc.ClipTrack()
    mic.play(np.array([2.0, -2.0, 0.5, 0.0], np.float32))
    first = pcm(await mic.recv())[:4]
    assert first.dtype == np.dtype("<i2") and first.tolist() == [32767, -32767, 16383, 0]


async def test_frames_carry_the_clip_then_silence_with_running_timestamps():
    mic = wc.ClipTrack()
    clip = np.linspace(-0.5, 0.5, wc.FRAME + 200).astype(np.float32)
    mic.play(clip)
    frames = [await mic.recv() for _ in range(3)]
    for n, frame in enumerate(frames):
        assert frame.sample_rate == wc.RATE and frame.pts == n * wc.FRAME
        assert frame.time_base == fractions.Fraction(1, wc.RATE) and frame.samples == wc.FRAME
    expected = (np.clip(clip, -1, 1) * 32767).astype("<i2")
    assert pcm(frames[0]).tolist() == expected[: wc.FRAME].tolist()
    second = pcm(frames[1])
    assert second[:200].tolist() == expected[wc.FRAME :].tolist() and not second[200:].any()  # padded
    assert not pcm(frames[2]).any()  # nothing queued: silence
    assert mic.sent_samples == 3 * wc.FRAME and mic.idle


async def test_a_clip_s_end_is_marked_when_the_frame_after_it_goes_out():
    mic = wc.ClipTrack()
    mic.play(np.full(wc.FRAME, 0.1, np.float32))
    await mic.recv()  # the clip's only frame
    assert mic.clip_ends == [] and not mic.clip_ended.is_set()
    await mic.recv()  # the next frame: the marker is passed
    assert len(mic.clip_ends) == 1 and mic.clip_ended.is_set()


async def test_clips_queued_back_to_back_each_get_an_end():
    mic = wc.ClipTrack()
    mic.play(np.full(wc.FRAME, 0.1, np.float32))
    mic.play(np.full(wc.FRAME, 0.2, np.float32))
    first, second, _ = [await mic.recv() for _ in range(3)]
    assert pcm(first)[0] == int(0.1 * 32767) and pcm(second)[0] == int(0.2 * 32767)
    assert len(mic.clip_ends) == 2


async def test_an_empty_clip_only_marks_an_end():
    mic = wc.ClipTrack()
    mic.play(np.zeros(0, np.float32))
    frame = await mic.recv()
    assert not pcm(frame).any() and len(mic.clip_ends) == 1 and mic.idle


async def test_a_stopped_track_gives_no_more_frames():
    mic = wc.ClipTrack()
    mic.stop()
    with pytest.raises(MediaStreamError):
        await mic.recv()


def test_a_refused_call_keeps_its_status_and_body():
    err = wc.CallRefused(429, {"error": {"code": "too_many_sessions"}})
    assert err.status == 429 and err.body["error"]["code"] == "too_many_sessions"
    assert str(err).startswith("429: ") and "too_many_sessions" in str(err)
    assert isinstance(err, Exception)


def test_loopback_only_limits_ice_to_127_0_0_1(monkeypatch):
    import aioice.ice

    monkeypatch.setattr(aioice.ice, "get_host_addresses", aioice.ice.get_host_addresses)
    wc.loopback_only()
    assert aioice.ice.get_host_addresses(use_ipv4=True, use_ipv6=True) == ["127.0.0.1"]
