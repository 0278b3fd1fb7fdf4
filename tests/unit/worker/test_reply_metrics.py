"""A reply's figures as the gateway's metrics frame, the same for realtime and duplex."""

from __future__ import annotations

from omnivox.agent.breakdown import StageTimes
from omnivox.agent.events import ReplyFigures, ReplyReport, ReplyState
from omnivox.core.errors import WorkerUnavailable
from omnivox.worker.reply_metrics import reply_metrics, stages_ms


def report(state: ReplyState, figures: ReplyFigures) -> ReplyReport:
    return ReplyReport("r1", state, figures, asr_busy_s=0.2, asr_audio_s=2.0)


def test_a_timed_reply_gives_its_breakdown_and_latencies() -> None:
    times = StageTimes(speech_end=10.0, noticed=10.08, decided=10.5, first_audio_sent=10.9)
    figures = ReplyFigures(llm_ttft_s=0.2, voice_to_voice_s=0.9, tts_busy_s=0.1, tts_audio_s=1.5, times=times)
    done = report(ReplyState.DONE, figures)
    metrics = reply_metrics(done)
    assert metrics.response_done and not metrics.interrupted and metrics.error_code is None
    assert metrics.voice_to_voice_s == 0.9 and metrics.llm_ttft_s == 0.2
    assert metrics.stages_s is not None and list(metrics.stages_s) == [
        "noticed",
        "decided",
        "first_audio_sent",
    ]
    assert (metrics.asr_busy_s, metrics.asr_audio_s, metrics.tts_audio_s) == (0.2, 2.0, 1.5)
    assert stages_ms(done) == {"noticed": 80.0, "decided": 500.0, "first_audio_sent": 900.0}


def test_a_cut_reply_counts_as_an_interruption_and_an_untimed_one_has_no_breakdown() -> None:
    cut = report(ReplyState.CANCELLED, ReplyFigures())
    metrics = reply_metrics(cut)
    assert metrics.interrupted and metrics.stages_s is None
    assert stages_ms(cut) == {}


def test_a_failed_reply_carries_its_error_code() -> None:
    failed = report(ReplyState.FAILED, ReplyFigures(error=WorkerUnavailable("llm down")))
    assert reply_metrics(failed).error_code == WorkerUnavailable("x").wire_code
