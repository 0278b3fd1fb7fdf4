"""A reply's figures as the gateway's metrics: one ``Metrics`` frame per reply the user heard, the same
for every protocol adapter over the voice agent (realtime sessions, cascade duplex units)."""

from __future__ import annotations

from omnivox.agent.events import ReplyReport, ReplyState
from omnivox.protocol.control.internal import Metrics


def stages_ms(report: ReplyReport) -> dict[str, float]:
    """The turn's breakdown in milliseconds after the end of the user's speech (empty: not timed)."""
    return {stage: round(s * 1000, 1) for stage, s in report.figures.times.marks().items()}


def reply_metrics(report: ReplyReport) -> Metrics:
    figures = report.figures
    return Metrics(
        error_code=figures.error.wire_code if figures.error is not None else None,
        voice_to_voice_s=figures.voice_to_voice_s,
        llm_ttft_s=figures.llm_ttft_s,
        tts_ttfa_s=figures.tts_ttfa_s,
        stages_s=figures.times.marks() or None,
        interrupted=report.state is ReplyState.CANCELLED,
        response_done=True,
        asr_busy_s=report.asr_busy_s,
        asr_audio_s=report.asr_audio_s,
        tts_busy_s=figures.tts_busy_s,
        tts_audio_s=figures.tts_audio_s,
    )
