"""The telephony bench's pure parts: its arguments, the servers' environment, and what a call's
sideband counts."""

from __future__ import annotations

import argparse
import asyncio
import json

import pytest
import websockets
from websockets.frames import Close

from omnivox.bench import realtime
from omnivox.bench.paced_caller import PAUSE_S
from omnivox.bench.telephony import TRANSPORTS, Sideband, _env, add_arguments
from omnivox.core.config import PhoneProfile


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults_run_every_transport_at_one_two_and_four_calls() -> None:
    args = _parse()
    assert args.calls == [1, 2, 4] and args.turns == 3 and args.silence_ms == 500
    assert args.transport == list(TRANSPORTS) == ["sip", "twilio", "websocket"]
    assert (args.llm, args.asr, args.log_dir, args.media_only) == ("local", "whisper", None, None)
    assert args.pause_s == PAUSE_S


def test_an_unknown_transport_is_refused(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse("--transport", "carrier-pigeon")
    assert exited.value.code == 2 and "invalid choice: 'carrier-pigeon'" in capsys.readouterr().err


def test_the_servers_env_takes_sip_on_the_port_and_a_private_rtp_range() -> None:
    env = _env(_parse("--silence-ms", "700", "--llm", "echo"), 5071)
    assert env["OMNIVOX_SIP_PORT"] == "5071" and env["OMNIVOX_LLM"] == "echo"
    low, high = int(env["OMNIVOX_RTP_PORT_MIN"]), int(env["OMNIVOX_RTP_PORT_MAX"])
    assert (low, high) == (40000 + 71 * 40, 40000 + 71 * 40 + 39) and high < 65536
    assert env["OMNIVOX_RECORD_SESSIONS"] == "false"
    profile = PhoneProfile.model_validate(json.loads(env["OMNIVOX_PHONE_PROFILES"])["default"])
    assert profile.turn_detection == {"type": "server_vad", "silence_duration_ms": 700}
    assert profile.end_call is False  # the bench hangs up itself
    for key, value in realtime.PRODUCTION_INTERVALS.items():
        assert env[key] == value


def test_every_sip_port_gets_an_rtp_range_inside_the_port_space() -> None:
    for port in (1024, 5060, 65535):
        env = _env(_parse(), port)
        assert 40000 <= int(env["OMNIVOX_RTP_PORT_MIN"]) < int(env["OMNIVOX_RTP_PORT_MAX"]) <= 65535


class FakeWs:
    """A stand-in sideband socket (a mock): yields its events, then the server's close."""

    def __init__(self, *events: dict) -> None:
        self.events = [json.dumps(e) for e in events]
        self.closed = False

    def __aiter__(self) -> FakeWs:
        return self

    async def __anext__(self) -> str:
        if self.events:
            return self.events.pop(0)
        raise websockets.ConnectionClosedOK(Close(1000, ""), None)

    async def close(self) -> None:
        self.closed = True


async def test_a_sideband_counts_events_and_reads_transcripts_in_order() -> None:
    done = "conversation.item.input_audio_transcription.completed"
    side = Sideband(
        FakeWs(
            {"type": "session.created"},
            {"type": done, "transcript": "hello"},
            {"type": "response.done"},
            {"type": done},
            {"type": "response.done"},
        )
    )
    await side.task  # the server's close ends the reading quietly
    assert side.count("response.done") == 2 and side.count("nothing") == 0
    assert side.transcripts() == ["hello", ""]
    assert side.first_after("response.done", side.events[0][0] - 1) == side.events[2][0]
    assert side.first_after("response.done", side.events[-1][0]) is None
    await side.close()
    assert side.ws.closed


async def test_closing_a_sideband_still_reading_stops_it() -> None:
    class Endless(FakeWs):
        async def __anext__(self) -> str:
            await asyncio.sleep(3600)
            raise AssertionError

    side = Sideband(Endless())
    await asyncio.sleep(0)
    await side.close()
    with pytest.raises(asyncio.CancelledError):
        await side.task
