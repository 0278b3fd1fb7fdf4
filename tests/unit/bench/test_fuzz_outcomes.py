"""What a fuzz run reports: outcomes by surface and kind, faults, and the logs' tracebacks."""

from __future__ import annotations

import io
import json

from omnivox.bench.fuzz_outcomes import Outcomes, is_fault, tracebacks


def test_faults_are_what_says_the_server_broke():
    for outcome in (
        "http:500",
        "http:500:internal_error",
        "closed:1011",
        "closed:1006",
        "error:internal_error",
    ):
        assert is_fault(outcome), outcome
    for outcome in ("http:413:message_too_large", "http:401", "closed:1008", "silent", "sip:488", "http:507"):
        assert not is_fault(outcome), outcome


def test_outcomes_count_by_surface_and_kind_and_log_each_frame():
    log = io.StringIO()
    outcomes = Outcomes(log=log)
    outcomes.add("realtime", 1, "nested", "error:invalid_event")
    outcomes.add("realtime", 2, "nested", "error:invalid_event")
    outcomes.add("realtime", 3, "binary", "closed:1011")
    outcomes.add("sip", 1, "garbage", "silent")
    assert outcomes.of("realtime") == {"error:invalid_event": 2, "closed:1011": 1}
    assert outcomes.faults("realtime") == 1 and outcomes.faults("sip") == 0
    assert outcomes.summary("realtime", top=1) == "error:invalid_event 2, +1 more"
    assert outcomes.as_json()["realtime"]["nested"] == {"error:invalid_event": 2}
    lines = [json.loads(line) for line in log.getvalue().splitlines()]
    assert lines[2] == {"surface": "realtime", "frame": 3, "kind": "binary", "outcome": "closed:1011"}


def test_tracebacks_and_error_lines_are_found_in_every_log(tmp_path):
    (tmp_path / "gateway.log").write_text(
        "INFO fine\n"
        "ERROR:    Exception in ASGI application\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "    raise KeyError\n"
        "KeyError: 'a'\n"
        "2026-01-01 00:00:00,000 ERROR asyncio: Task was destroyed but it is pending!\n"
    )
    (tmp_path / "worker0.log").write_text("INFO all good\nWARNING a refusal\n")
    found = tracebacks(tmp_path)
    assert list(found) == ["gateway.log"]
    assert found["gateway.log"][0] == "KeyError: 'a'"
    assert "Task was destroyed" in found["gateway.log"][1] and len(found["gateway.log"]) == 2
