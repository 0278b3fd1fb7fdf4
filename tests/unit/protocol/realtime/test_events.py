"""Server events of the Realtime API: the error shape, the beta names, the omnivox.queue extension."""

from __future__ import annotations

import json

import pytest

from omnivox.core import errors
from omnivox.core.errors import ActiveResponse, InternalError
from omnivox.protocol.realtime import events as ev


def test_error_events_have_the_openai_shape() -> None:
    client_side = ev.error_event(ActiveResponse("busy"), "evt_1").model_dump(mode="json")
    assert client_side["type"] == "error" and client_side["event_id"].startswith("event_")
    assert client_side["error"] == {
        "type": "invalid_request_error",
        "code": "conversation_already_has_active_response",
        "message": "busy",
        "param": None,
        "event_id": "evt_1",
    }
    assert ev.error_event(InternalError("boom")).error.type == "server_error"


@pytest.mark.parametrize(
    ("err", "kind"),
    [
        (errors.InvalidJson("x"), "invalid_request_error"),
        (errors.MessageTooLarge("x"), "invalid_request_error"),
        (errors.QueueFull("x"), "invalid_request_error"),
        (errors.SessionLimitReached("x"), "invalid_request_error"),
        (errors.Unauthorized("x"), "invalid_request_error"),
        (errors.WorkerLost("x"), "server_error"),
        (errors.EngineFailure("x"), "server_error"),
        (errors.IllegalTransition("x"), "server_error"),
        (errors.InternalError("x"), "server_error"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else v,
)
def test_error_type_says_whose_fault_it_is(err, kind):
    assert ev.error_event(err).error.type == kind


def test_error_code_is_the_wire_code_and_param_only_a_string():
    e = ev.error_event(errors.UnknownMessageType("what", param="type", known=["a"])).error
    assert (e.code, e.param, e.event_id) == ("invalid_event", "type", None)
    assert ev.error_event(errors.InvalidMessage("x", param=3)).error.param is None
    assert ev.error_event(errors.MessageTooLarge("x", limit=5)).error.code == "message_too_large"


def test_every_server_event_gets_a_fresh_event_id():
    a, b = ev.Cleared(), ev.Cleared()
    assert a.event_id.startswith("event_") and a.event_id != b.event_id
    assert ev.Cleared(event_id="mine").event_id == "mine"


def test_events_dump_as_openai_clients_read_them():
    delta = json.loads(ev.AudioDelta(response_id="r1", item_id="i1", delta="AAAA").model_dump_json())
    assert delta.pop("event_id").startswith("event_")
    assert delta == {
        "type": "response.output_audio.delta",
        "response_id": "r1",
        "output_index": 0,
        "item_id": "i1",
        "content_index": 0,
        "delta": "AAAA",
    }
    done = ev.TranscriptionCompleted(item_id="i", transcript="hi")
    assert done.usage == {"type": "duration", "seconds": 0.0}
    assert ev.TranscriptionCompleted(item_id="i", transcript="x").usage is not done.usage


def test_queue_status_defaults():
    q = ev.QueueStatus(status="queued", ticket_id="t")
    assert (q.type, q.position, q.queue_length, q.estimated_wait_s) == ("omnivox.queue", 0, 0, 0.0)


def _server_event_types() -> set[str]:
    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    return {
        c.model_fields["type"].default
        for base in (ev.ServerEvent, ev.ExtensionEvent)
        for c in subclasses(base)
        if "type" in c.model_fields and isinstance(c.model_fields["type"].default, str)
    }


def test_beta_and_ga_names_are_inverse_maps_of_real_events():
    assert len(set(ev.BETA_SERVER_TYPES.values())) == len(ev.BETA_SERVER_TYPES)  # one-to-one
    assert {ga: beta for beta, ga in ev.GA_SERVER_TYPES.items()} == ev.BETA_SERVER_TYPES
    ga_names = _server_event_types()
    assert set(ev.BETA_SERVER_TYPES) <= ga_names  # every renamed event exists
    assert not set(ev.GA_SERVER_TYPES) & ga_names  # and no beta name is also a GA name
    assert "response.output_audio.delta" in ga_names and "omnivox.queue" in ga_names


@pytest.mark.parametrize(
    ("given", "ga"),
    [
        ("response.audio.delta", "response.output_audio.delta"),
        ("response.audio_transcript.done", "response.output_audio_transcript.done"),
        ("conversation.item.created", "conversation.item.added"),
        ("response.text.delta", "response.output_text.delta"),
        ("response.output_audio.delta", "response.output_audio.delta"),
        ("session.created", "session.created"),
        ("omnivox.queue", "omnivox.queue"),
        ("not.an.event", "not.an.event"),
    ],
)
def test_ga_type(given, ga):
    assert ev.ga_type(given) == ga


def test_ga_type_undoes_every_beta_name():
    for ga, beta in ev.BETA_SERVER_TYPES.items():
        assert ev.ga_type(beta) == ga and ev.ga_type(ga) == ga


def test_extension_events_say_their_type_first_so_the_gateway_can_withhold_them() -> None:
    from omnivox.protocol.realtime.wire import REALTIME, is_extension

    for event in (
        ev.SettingWarning(message="m"),
        ev.QueueStatus(status="queued", ticket_id="t"),
        ev.InterruptionPaused(response_id="r", item_id="i", audio_end_ms=1),
        ev.InterruptionResumed(response_id="r", item_id="i", audio_start_ms=1, reason="echo"),
    ):
        assert is_extension(event.model_dump_json()), event
    assert not is_extension(ev.SessionCreated(session={}).model_dump_json())
    assert not is_extension('{"type":"error"}') and not is_extension(b'{"type":"omnivox.queue"}')
    withheld = REALTIME.withheld({})
    assert withheld is is_extension  # stock clients never see them
    assert REALTIME.withheld({"omnivox_events": "true"}) is None  # the pages and benches ask
