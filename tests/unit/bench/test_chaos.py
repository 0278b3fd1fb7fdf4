"""How the chaos run judges a call: served, refused with a reason, told what failed, or not."""

from __future__ import annotations

from omnivox.bench.chaos import DROPPED, REFUSED, SERVED, STUCK, TOLD, Call, Hit, settled, verdict


def call(*outcomes: str, ended: float = 100.0) -> Call:
    return Call("c", 0.0, ended, list(outcomes))


GATEWAY_KILLED = Hit(99.5, "gateway", "kill", 101.0)
WORKER_PAUSED = Hit(80.0, "worker1", "pause", 83.0)


def test_answered_turns_are_served():
    assert verdict(call("completed", "completed"), []) == SERVED


def test_an_error_before_any_answer_is_a_refusal_and_after_one_a_failure_told():
    assert verdict(call("error session_limit_reached"), []) == REFUSED
    assert verdict(call("completed", "error worker_lost"), []) == TOLD
    assert verdict(call("response failed"), []) == TOLD


def test_a_cut_connection_is_told_only_when_the_gateway_was_down():
    assert verdict(call("completed", "connection lost"), [GATEWAY_KILLED]) == TOLD
    assert verdict(call("connection lost"), [WORKER_PAUSED]) == DROPPED


def test_a_turn_with_no_word_is_stuck_unless_a_pause_or_the_gateway_explains_it():
    assert verdict(call("timeout"), []) == STUCK
    assert verdict(call("timeout", ended=100.0), [WORKER_PAUSED]) == TOLD
    assert verdict(call("timeout", ended=500.0), [WORKER_PAUSED]) == STUCK


def test_settled_means_every_leftover_is_empty():
    clean = {
        "workers_not_idle": [],
        "slots_used": 0,
        "sessions": 0,
        "shm_segments": [],
        "open_files_grown": {},
    }
    assert settled(clean)
    assert not settled({**clean, "slots_used": 1})
    assert not settled({**clean, "shm_segments": ["ovx_1_2_abcdef01"]})


def test_a_close_code_or_an_http_refusal_tells_the_client():
    assert verdict(call("completed", "closed 1011"), []) == TOLD
    assert verdict(call("refused 503"), []) == REFUSED
    assert verdict(call("could not connect (ConnectionRefusedError)"), [GATEWAY_KILLED]) == TOLD
    assert verdict(call("could not connect (ConnectionRefusedError)"), []) == DROPPED
