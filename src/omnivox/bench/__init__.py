"""Benchmarks: each module exposes ``add_arguments(parser)`` and ``run(args) -> int``.

Nothing at runtime imports this package; the CLI imports a benchmark module only when it runs it.
"""

BENCHES = {
    "pool": "gateway dispatch latency and memory with 1 to 10,000 queued tickets",
    "kv": "time to first token per turn, KV-cache hit vs forced miss",
    "voice": "ASR, TTS and VAD speed of the embedded voice models",
    "asr": "word error rate and cost of each embedded ASR on synthetic, telephone and human speech",
    "turns": "end-of-turn decisions on a scripted set: semantic_vad per eagerness vs server_vad",
    "realtime": "N concurrent realtime callers: voice-to-voice latency, ASR/TTS real-time factors, errors",
    "duplex": "N concurrent duplex callers: unit wall-clock (listen/speak), lagging, speech end to speech",
    "conversation": "scripted callers over a speakerphone: false barge-ins (echo, backchannel, noise), "
    "missed barge-ins and reaction, end of turn, voice-to-voice",
    "interruptions": "speech over a reply (backchannels, noise, barge-ins, echo) judged offline on the real "
    "hearing; the interruption judge's thresholds fitted to it",
    "noise": "noise_reduction: WER at 10/5/0 dB SNR (babble, pink, fan) with and without the suppressor, "
    "false speech on noise alone, its CPU",
    "pipeline": "the staged pipeline's own overhead: three no-op stages, latency and messages/s",
    "fuzz": "seeded hostile frames on every protocol and surface (WebRTC offers, client secrets, recordings, "
    "uploads, SIP, carrier streams), open and keyed: per-frame outcomes, server faults and logged tracebacks",
    "chaos": "workers, pipeline stages and the gateway killed, paused and restarted at random under paced "
    "load: every call served, refused with a reason or told what failed; nothing held afterwards",
    "soak": "paced callers for M minutes (embedded models, recording on): memory and open files per process "
    "each minute, every turn's outcome, growth per hour after warm-up",
    "recording": "the session recorder's CPU and bytes per session-minute of each kind, in process",
    "peer": "omnivox side by side with pipecat built from the same models on the same machine: "
    "voice-to-voice and callers at real time for both, as a ratio",
    "telephony": "N concurrent phone calls (SIP, Twilio streams) at 8 kHz beside WebSocket callers: "
    "voice-to-voice, real time, CPU per call, WER on telephone audio",
}
