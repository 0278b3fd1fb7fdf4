"""Worker states, capabilities and the registration/health JSON between workers and the gateway."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from omnivox.core.errors import InvalidWorkerUrl
from omnivox.protocol.control.workers import (
    TASKS,
    Capabilities,
    Registration,
    RegistrationReply,
    WorkerHealth,
    WorkerState,
    seat_of,
    worker_base_url,
)


def test_the_states_of_the_design():
    assert {s.value for s in WorkerState} == {
        "LOADING",
        "IDLE",
        "BUSY_STREAMING",
        "DUPLEX_ACTIVE",
        "DUPLEX_PAUSED",
        "ERROR",
        "OFFLINE",
    }
    assert all(s == s.value for s in WorkerState)  # StrEnum: they are their JSON


def test_busy_states_are_those_a_session_holds():
    busy = {s for s in WorkerState if s.busy}
    assert busy == {WorkerState.BUSY_STREAMING, WorkerState.DUPLEX_ACTIVE, WorkerState.DUPLEX_PAUSED}
    assert {state for state, _ in TASKS.values()} <= busy  # serving any task makes a worker busy


def test_tasks():
    assert TASKS == {
        "streaming": (WorkerState.BUSY_STREAMING, "streaming"),
        "audio_duplex": (WorkerState.DUPLEX_ACTIVE, "duplex"),
        "omni_duplex": (WorkerState.DUPLEX_ACTIVE, "duplex"),
        "realtime": (WorkerState.DUPLEX_ACTIVE, "realtime"),
    }
    assert all(cap in Capabilities.model_fields for _, cap in TASKS.values())


@pytest.mark.parametrize("task", sorted(TASKS))
def test_serves_needs_exactly_the_task_s_capability(task):
    needed = TASKS[task][1]
    assert Capabilities(**{"streaming": False, needed: True}).serves(task)
    everything_else = {c: True for c in Capabilities.model_fields if c != needed}
    assert not Capabilities(**{**everything_else, needed: False}).serves(task)


def test_default_capabilities_serve_streaming_only():
    caps = Capabilities()
    assert {task for task in TASKS if caps.serves(task)} == {"streaming"}
    assert not (caps.audio_in or caps.audio_out or caps.vision)


def test_serves_an_unknown_task_is_a_key_error():
    with pytest.raises(KeyError):
        Capabilities().serves("telepathy")


def test_health_from_json():
    health = WorkerHealth.model_validate_json(
        '{"state": "IDLE", "engine": "echo", "capabilities": {"realtime": true}, '
        '"cached_hash": "ab", "new": 1}'
    )
    assert health.state is WorkerState.IDLE and health.capabilities.serves("realtime")
    assert (health.status, health.kv_length, health.sessions_served, health.voices) == ("ok", 0, 0, [])
    assert WorkerHealth.model_validate_json(health.model_dump_json()) == health


@pytest.mark.parametrize(
    "data",
    [
        {"state": "SLEEPING", "engine": "echo", "capabilities": {}},
        {"state": "idle", "engine": "echo", "capabilities": {}},
        {"engine": "echo", "capabilities": {}},
        {"state": "IDLE", "capabilities": {}},
        {"state": "IDLE", "engine": "echo"},
        {"state": "IDLE", "engine": "echo", "capabilities": {"duplex": "maybe"}},
        {"state": "IDLE", "engine": "echo", "capabilities": {}, "kv_length": "long"},
    ],
)
def test_bad_health_is_refused(data):
    with pytest.raises(ValidationError):
        WorkerHealth.model_validate(data)


def test_registration():
    reg = Registration.model_validate({"url": "http://w:9001"})
    assert reg.worker_id is None and reg.health is None
    full = Registration.model_validate(
        {
            "url": "http://w",
            "worker_id": "w1",
            "health": {"state": "LOADING", "engine": "tiny", "capabilities": {}},
        }
    )
    assert full.health.state is WorkerState.LOADING
    with pytest.raises(ValidationError):
        Registration.model_validate({"worker_id": "w1"})
    with pytest.raises(ValidationError):
        Registration.model_validate({"url": "http://w", "health": {"state": "IDLE"}})
    assert RegistrationReply(worker_id="w1", heartbeat_interval_s=2).heartbeat_interval_s == 2.0


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
        ("http://127.0.0.1:9000/", "http://127.0.0.1:9000"),
        ("https://gpu-3.lan", "https://gpu-3.lan"),
        ("http://[::1]:80", "http://[::1]:80"),
        (" http://w:1 ", "http://w:1"),
        ("http://w:1/seats/0", "http://w:1/seats/0"),  # a seat of a worker process (--seats)
        ("http://w:1/seats/12/", "http://w:1/seats/12"),
    ],
)
def test_a_worker_url_is_scheme_host_and_port(url, base):
    assert worker_base_url(url) == base


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1",
        "http://w:1/admin",
        "http://w:1?x=1",
        "http://w:1/#f",
        "http://u:p@w:1",
        "ftp://w:1",
        "http:///nohost",
        "http://w:99999",
        "w:1",
        "",
        "http://w:1/seats/",
        "http://w:1/seats/01",  # one URL per seat: never two spellings of one
        "http://w:1/seats/64",
        "http://w:1/seats/1/health",
        "http://w:1/seats/1?x=1",
        "http://w:1//",
    ],
)
def test_anything_more_or_less_is_refused(url):
    with pytest.raises(InvalidWorkerUrl):
        worker_base_url(url)


@pytest.mark.parametrize(
    "url, seat",
    [
        ("http://h:7/seats/2", ("http://h:7", 2)),
        ("https://[::1]:7/seats/0/", ("https://[::1]:7", 0)),
        ("http://h:7", None),
        ("http://h:7/seats/02", None),
        ("http://h:7/seats/health", None),
        ("/seats/1", None),
    ],
)
def test_a_seat_s_url_names_its_process_and_its_seat(url, seat):
    assert seat_of(url) == seat
