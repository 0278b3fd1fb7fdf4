"""Errors as data: codes, categories and their wire mappings, all in one place."""

from __future__ import annotations

import re

import pytest

from omnivox.core import errors as E


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


# every error omnivox reports (the bases starting with "_" are not reported themselves)
ERRORS = sorted(
    (c for c in _subclasses(E.OmnivoxError) if not c.__name__.startswith("_")), key=lambda c: c.__name__
)
RECOVERABLE = [c for c in ERRORS if issubclass(c, E._Recoverable)]
POLICY = [
    E.QueueFull,
    E.SessionLimitReached,
    E.Unauthorized,
    E.WorkerUnavailable,
    E.WorkerBusy,
    E.InvalidSessionId,
    E.InvalidResumeToken,
    E.TooManySessions,
    E.SlowClient,
    E.TooManyWorkers,
    E.SessionIdle,
    E.InvalidSignature,
    E.StaleAssignment,
    E.StoreUnavailable,
    E.GatewayDraining,
]
SERVER = [
    E.WorkerLost,
    E.EngineFailure,
    E.IllegalTransition,
    E.InternalError,
    E.DialFailed,
    E.StorageUnavailable,
]
# a request through the staged pipeline failed: server-side, and the session goes on
PIPELINE = [c for c in ERRORS if issubclass(c, E.PipelineError)]


def test_worker_lost_is_recoverable_for_streaming():
    assert not E.WorkerLost("x").fatal and E.WorkerLost.code == "worker_lost"


def test_every_error_has_a_distinct_code():
    codes = [c.code for c in ERRORS]
    assert len(set(codes)) == len(codes), sorted(codes)
    assert E.InternalError.code == E.OmnivoxError.code == "internal_error"  # the base reports as internal


def test_the_groups_cover_every_error():
    assert set(RECOVERABLE) | set(POLICY) | set(SERVER) | set(PIPELINE) | {E.TicketCancelled} == set(ERRORS)


@pytest.mark.parametrize("cls", PIPELINE, ids=lambda c: c.__name__)
def test_pipeline_faults_are_recoverable_server_faults(cls):
    assert not cls("x").fatal and cls.http_status == 502 and cls.close_code == E.WS_SERVER_ERROR


def test_a_stage_s_failure_keeps_its_code_and_known_codes_their_class():
    assert isinstance(E.pipeline_error("stage_lost", "gone"), E.StageLost)
    err = E.pipeline_error("engine_error", "the model failed")
    assert err.code == "engine_error" and not err.fatal


@pytest.mark.parametrize("cls", RECOVERABLE, ids=lambda c: c.__name__)
def test_recoverable_errors_keep_the_connection_and_are_the_client_s_fault(cls):
    err = cls("x")
    assert err.category is E.Category.RECOVERABLE and not err.fatal
    assert cls.close_code == E.WS_NORMAL == 1000 and 400 <= cls.http_status < 500


@pytest.mark.parametrize("cls", POLICY, ids=lambda c: c.__name__)
def test_policy_errors_are_fatal_and_close_1008(cls):
    assert cls("x").fatal and cls.close_code == E.WS_POLICY == 1008
    assert cls.http_status in (400, 401, 403, 408, 409, 429, 503)


@pytest.mark.parametrize("cls", SERVER, ids=lambda c: c.__name__)
def test_server_faults_close_1011_with_a_5xx(cls):
    assert cls.close_code == E.WS_SERVER_ERROR == 1011 and cls.http_status in (500, 502, 507)


def test_server_faults_are_fatal_except_a_lost_worker_a_call_not_answered_or_a_full_disk():
    recoverable = [c.__name__ for c in SERVER if not c("x").fatal]
    assert recoverable == ["WorkerLost", "DialFailed", "StorageUnavailable"]


def test_a_cancelled_ticket_ends_the_session_with_a_normal_close():
    err = E.TicketCancelled("cancelled")
    assert err.fatal and err.close_code == 1000 and err.http_status == 409


def test_1011_is_said_exactly_for_http_500_502_and_507():
    for cls in ERRORS:
        assert (cls.close_code == E.WS_SERVER_ERROR) == (cls.http_status in (500, 502, 507)), cls.__name__
        assert cls.close_code in (E.WS_NORMAL, E.WS_POLICY, E.WS_SERVER_ERROR), cls.__name__


@pytest.mark.parametrize(
    ("cls", "status"),
    [
        (E.InvalidJson, 400),
        (E.InvalidMessage, 422),
        (E.MessageTooLarge, 413),
        (E.PrefillRequired, 409),
        (E.GenerationInProgress, 409),
        (E.NotFound, 404),
        (E.ItemNotFound, 404),
        (E.ActiveResponse, 409),
        (E.Unauthorized, 401),
        (E.QueueFull, 503),
        (E.WorkerLost, 502),
    ],
)
def test_http_statuses(cls, status):
    assert cls.http_status == status


def test_item_not_found_is_a_not_found():
    assert issubclass(E.ItemNotFound, E.NotFound) and E.ItemNotFound.code != E.NotFound.code


def test_wire_code_is_the_realtime_name_where_there_is_one():
    for cls in (E.InvalidJson, E.UnknownMessageType, E.InvalidMessage):
        assert cls("x").wire_code == "invalid_event" != cls.code
    for cls in ERRORS:
        if cls.realtime_code is None:
            assert cls("x").wire_code == cls.code


def test_to_payload():
    assert E.QueueFull("full").to_payload() == {"type": "error", "code": "queue_full", "message": "full"}
    err = E.InvalidMessage("bad", param="x", event_id=None, known=["a"])
    assert err.details == {"param": "x", "known": ["a"]}  # None details are dropped
    assert err.to_payload() == {
        "type": "error",
        "code": "invalid_message",
        "message": "bad",
        "details": {"param": "x", "known": ["a"]},
    }


def test_errors_are_exceptions_with_their_message():
    err = E.WorkerBusy("it is busy")
    assert isinstance(err, Exception) and str(err) == err.message == "it is busy"
    with pytest.raises(E.OmnivoxError):
        raise err


def test_as_omnivox_error():
    mine = E.QueueFull("full")
    assert E.as_omnivox_error(mine) is mine
    wrapped = E.as_omnivox_error(KeyError("k"))
    assert isinstance(wrapped, E.InternalError) and wrapped.message == "KeyError: 'k'"
    assert wrapped.fatal and wrapped.close_code == 1011
    assert E.as_omnivox_error(ValueError()).message == "ValueError: "


def test_codes_are_lower_snake_case_and_statuses_are_client_or_server_errors():
    for cls in ERRORS:
        assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", cls.code), cls.__name__
        assert cls.realtime_code is None or re.fullmatch(r"[a-z][a-z0-9_]*", cls.realtime_code)
        assert 400 <= cls.http_status <= 599, cls.__name__


@pytest.mark.parametrize(
    ("cls", "code", "status", "close", "fatal"),
    [
        (E.UnusableSdp, "unusable_sdp", 488, 1000, False),  # SIP's Not Acceptable Here
        (E.CallNotRinging, "call_state_conflict", 409, 1000, False),
        (E.InvalidSignature, "invalid_signature", 403, 1008, True),
        (E.DialFailed, "dial_failed", 502, 1011, False),
        (E.RecordingBusy, "recording_in_progress", 409, 1000, False),
        (E.InvalidCursor, "invalid_cursor", 400, 1000, False),
        (E.StorageUnavailable, "storage_unavailable", 507, 1011, False),
        (E.InvalidSessionId, "invalid_session_id", 400, 1008, True),
        (E.InvalidResumeToken, "invalid_resume_token", 400, 1008, True),
    ],
)
def test_telephony_recording_and_session_errors_on_the_wire(cls, code, status, close, fatal):
    err = cls("x")
    assert (err.code, err.http_status, err.close_code, err.fatal) == (code, status, close, fatal)
