"""OpenTelemetry traces across processes: a real gateway and worker export to a real OTLP receiver.

A realtime session whose client sends its own W3C ``traceparent`` is one trace: the gateway's
``session`` span (a child of the client's), its ``queue`` span, and the worker's ``worker.session``
span (a child of the gateway's, in another process), each under its process's ``service.name``.
A spoken turn adds the agent's spans under the worker's: the ``user_turn`` (its ``speech``,
``end_of_turn`` and ``asr.final``) and the ``reply`` that answered it, with its stages as events.
On a staged pipeline (``serve --pipeline``) the reply's request goes on in the same trace: the
coordinator's ``pipeline.request`` under the worker's session, each stage's span under it.
"""

from __future__ import annotations

import numpy as np
import pytest

from cluster import ECHO_VOICE, cluster
from otlp_receiver import OtlpReceiver
from pipeline_served import AUTH, KEY, Served
from rtclient import Events, client, silence, speech, stream

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    receiver = OtlpReceiver().start()
    env = {
        **ECHO_VOICE,
        "OMNIVOX_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # export within a tenth of a second (default 5 s)
    }
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("traced"), **env) as c:
        yield c, receiver
    receiver.stop()


async def test_a_realtime_session_is_one_trace_across_gateway_and_worker(traced):
    c, receiver = traced
    headers = {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"}
    async with client(c.ws).realtime.connect(model="omnivox", extra_headers=headers) as conn:
        events = Events(conn)
        await events.wait_for("session.created")
        await conn.conversation.item.create(
            item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        )
        await conn.response.create(response={"output_modalities": ["text"]})
        await events.wait_for("response.done")
        await events.stop()

    def complete(spans) -> bool:
        names = {(s.service, s.name) for s in spans if s.trace_id == CLIENT_TRACE}
        return {("omnivox-gateway", "session"), ("omnivox-worker", "worker.session")} <= names

    spans = [s for s in receiver.wait_for(complete) if s.trace_id == CLIENT_TRACE]
    by_name = {s.name: s for s in spans}
    session, queue, worker = by_name["session"], by_name["queue"], by_name["worker.session"]
    assert session.parent_id == CLIENT_SPAN  # the client's trace goes on
    assert queue.parent_id == session.span_id and queue.service == "omnivox-gateway"
    assert worker.parent_id == session.span_id  # across processes
    assert session.attributes["omnivox.protocol"] == "realtime"
    assert worker.attributes["omnivox.engine"] == "cascade" == queue.attributes["omnivox.engine"]
    assert worker.attributes["omnivox.worker_id"] == queue.attributes["omnivox.worker_id"]
    assert session.start_ns <= queue.start_ns <= queue.end_ns <= worker.start_ns <= session.end_ns


SPOKEN_TRACE = "0af7651916cd43dd8448eb211c80319c"


async def one_spoken_turn(sdk, headers: dict[str, str]) -> None:
    """Say one sentence to a realtime session and wait for the reply to it."""
    async with sdk.realtime.connect(model="omnivox", extra_headers=headers) as conn:
        events = Events(conn)
        await events.wait_for("session.created", timeout=30)
        clip = np.concatenate([silence(0.3), speech("what is the weather"), silence(1.2)])
        await stream(conn, clip, speed=2)
        await events.wait_for("response.done", timeout=60)
        await events.stop()


async def test_a_spoken_turn_and_its_reply_are_spans_under_the_worker_in_order(traced):
    c, receiver = traced
    headers = {"traceparent": f"00-{SPOKEN_TRACE}-b7ad6b7169203331-01"}
    await one_spoken_turn(client(c.ws), headers)

    wanted = {"session", "worker.session", "user_turn", "speech", "end_of_turn", "asr.final", "reply"}

    def complete(spans) -> bool:
        return wanted <= {s.name for s in spans if s.trace_id == SPOKEN_TRACE}

    spans = [s for s in receiver.wait_for(complete) if s.trace_id == SPOKEN_TRACE]
    by_name = {s.name: s for s in spans}
    worker, turn, reply = by_name["worker.session"], by_name["user_turn"], by_name["reply"]
    speech_span, wait, final = by_name["speech"], by_name["end_of_turn"], by_name["asr.final"]
    assert turn.parent_id == worker.span_id and turn.service == "omnivox-worker"
    assert {s.parent_id for s in (speech_span, wait, final)} == {turn.span_id}
    assert reply.parent_id == turn.span_id  # the reply answers that turn
    # in order: the speech, the turn detection's wait, the final transcript; all inside the session
    assert worker.start_ns <= speech_span.start_ns <= speech_span.end_ns <= wait.end_ns <= final.end_ns
    assert final.end_ns <= turn.end_ns <= worker.end_ns and reply.end_ns <= worker.end_ns
    assert wait.attributes["omnivox.turn_detection"] == "server_vad"
    assert reply.attributes["omnivox.llm"] == "echo" and reply.attributes["omnivox.state"] == "done"
    stages = [e for e in reply.events if e in ("llm.first_token", "tts.first_audio", "first_audio_sent")]
    assert stages == ["llm.first_token", "tts.first_audio", "first_audio_sent"]
    assert reply.events[-1] == "played"


PIPELINE_TRACE = "5c1e3d0a9b8f47e6a2d4c6b8e0f2a4c6"


@pytest.fixture(scope="module")
def traced_pipeline(tmp_path_factory):
    receiver = OtlpReceiver().start()
    env = {"OMNIVOX_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    served = Served(tmp_path_factory.mktemp("traced-pipeline"), workers=1, env=env)
    try:
        served.wait(served.ready)
        yield served, receiver
    finally:
        served.stop()
        receiver.stop()


async def test_a_pipeline_reply_is_one_trace_through_the_coordinator_and_its_stages(traced_pipeline):
    served, receiver = traced_pipeline
    headers = {**AUTH, "traceparent": f"00-{PIPELINE_TRACE}-a3ce929d0e0e4736-01"}
    await one_spoken_turn(client(served.ws, api_key=KEY), headers)

    def said(s) -> bool:  # the request of the reply that was said (one prepared in a pause may be dropped)
        return s.name == "pipeline.request" and s.attributes.get("omnivox.state") == "completed"

    def complete(spans) -> bool:
        mine = [s for s in spans if s.trace_id == PIPELINE_TRACE]
        said_ids = {s.span_id for s in mine if said(s) and "tts" in s.attributes["omnivox.exits"]}
        under = {s.name for s in mine if s.parent_id in said_ids}
        heard = {
            s.span_id for s in mine if s.name == "pipeline.request" and s.attributes["omnivox.exits"] == "asr"
        }
        return (
            "worker.session" in {s.name for s in mine}
            and {"stage.llm", "stage.tts"} <= under
            and any(s.name == "stage.asr" and s.parent_id in heard for s in mine)
        )

    spans = [s for s in receiver.wait_for(complete, timeout=40) if s.trace_id == PIPELINE_TRACE]
    worker = next(s for s in spans if s.name == "worker.session")
    request = next(s for s in spans if said(s) and "tts" in s.attributes["omnivox.exits"])
    assert request.service == "omnivox-coordinator" and request.parent_id == worker.span_id
    stages = {s.name: s for s in spans if s.parent_id == request.span_id}
    # each stage, in its own process, under the coordinator's span
    assert stages["stage.llm"].service == "omnivox-stage-llm"
    assert stages["stage.tts"].service == "omnivox-stage-tts"
    assert stages["stage.llm"].attributes["omnivox.outcome"] == "done"
    assert request.start_ns <= stages["stage.llm"].start_ns <= stages["stage.tts"].end_ns <= request.end_ns
    # the session's hearing (its ASR stream) is a request of the same trace, heard by the ASR stage
    hearing = next(
        s for s in spans if s.name == "pipeline.request" and s.attributes["omnivox.exits"] == "asr"
    )
    assert hearing.parent_id == worker.span_id
    assert any(
        s.name == "stage.asr" and s.service == "omnivox-stage-asr" and s.parent_id == hearing.span_id
        for s in spans
    )
