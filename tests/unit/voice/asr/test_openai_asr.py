"""The OpenAI-compatible transcription client against the fake server: one WAV per utterance at flush,
word times when the server gives them, a fallback for servers that refuse verbose_json, and every
failure of the server as ``EngineFailure``."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from fake_openai_service import _parse_multipart
from omnivox.audio.wav import read_wav
from omnivox.core.errors import EngineFailure
from omnivox.voice.asr.base import TimedWord
from omnivox.voice.asr.openai_asr import SERVICE, OpenAIAsr

RATE = 16000


def seconds(n: float, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(rate * n)) / rate
    return (0.3 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)


def feed_frames(asr: OpenAIAsr, audio: np.ndarray) -> list:
    step = asr.sample_rate // 50
    return [asr.feed(audio[i : i + step]) for i in range(0, len(audio), step)]


def json_answer(body: object, status: int = 200):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body)

    return handler


def test_an_utterance_is_sent_at_flush_and_comes_back_with_word_times(fake_service) -> None:
    asr = OpenAIAsr(fake_service.url)
    assert not asr.streaming
    assert feed_frames(asr, seconds(1.0)) == [None] * 50  # no partials
    assert fake_service.state.requests == []  # nothing sent before the utterance ends
    final = asr.flush()
    assert final.final and final.text == "heard 1.00 seconds" and final.start_ms == 0.0
    third = 1000.0 / 3
    assert [w.text for w in final.words] == ["heard", "1.00", "seconds"]
    assert [w.start_ms for w in final.words] == pytest.approx([0.0, third, 2 * third])
    assert final.words[-1].end_ms == pytest.approx(1000.0)
    (req,) = fake_service.state.requests
    assert req == {
        "path": "transcriptions",
        "model": "whisper-1",
        "response_format": "verbose_json",
        "timestamp_granularities[]": "word",
    }
    asr.close()


def test_word_times_of_a_later_utterance_are_on_the_session_clock(fake_service) -> None:
    asr = OpenAIAsr(fake_service.url)
    asr.transcribe(seconds(1.0))
    second = asr.transcribe(seconds(0.5))
    assert second.start_ms == 1000.0 and second.text == "heard 0.50 seconds"
    assert second.words[0].start_ms == 1000.0
    assert second.words[-1].end_ms == pytest.approx(1500.0)
    asr.reset()
    assert asr.transcribe(seconds(0.5)).start_ms == 0.0
    asr.close()


def test_model_and_language_are_sent(fake_service) -> None:
    asr = OpenAIAsr(fake_service.url + "/v1/", model="large-v3", language="fr")
    asr.transcribe(seconds(0.2))
    (req,) = fake_service.state.requests
    assert req["model"] == "large-v3" and req["language"] == "fr"
    asr.close()


def test_a_server_without_word_timestamps_is_asked_for_plain_json_from_then_on(fake_service) -> None:
    fake_service.state.reject_verbose_json = True
    asr = OpenAIAsr(fake_service.url)
    first = asr.transcribe(seconds(0.5))
    assert first.text == "heard 0.50 seconds" and first.words == ()
    assert [r["response_format"] for r in fake_service.state.requests] == ["verbose_json", "json"]
    asr.transcribe(seconds(0.5))
    assert [r["response_format"] for r in fake_service.state.requests] == ["verbose_json", "json", "json"]
    assert "timestamp_granularities[]" not in fake_service.state.requests[-1]
    asr.close()


def test_nothing_is_sent_for_an_empty_utterance_or_an_abandoned_one(fake_service) -> None:
    asr = OpenAIAsr(fake_service.url)
    assert asr.flush().text == ""
    asr.feed(np.zeros(0, np.float32))
    assert asr.in_utterance and asr.flush().text == ""
    feed_frames(asr, seconds(0.6))
    asr.reset()  # the caller hung up
    assert fake_service.state.requests == []
    # the abandoned audio is not sent with the next utterance
    assert asr.transcribe(seconds(0.3)).text == "heard 0.30 seconds"
    asr.close()


def test_the_upload_is_the_fed_audio_as_16_bit_wav_at_the_asr_rate(canned_client) -> None:
    uploads: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        uploads.append(_parse_multipart(request.headers["content-type"], request.read()))
        return httpx.Response(200, json={"text": " hi "})

    x = seconds(0.25, 8000)
    asr = OpenAIAsr("http://unused", sample_rate=8000, client=canned_client(handler))
    final = asr.transcribe(x)
    assert final.text == "hi" and final.words == ()  # stripped; no words in the answer
    audio, rate = read_wav(uploads[0]["file"])
    assert rate == 8000 and len(audio) == len(x)
    assert np.max(np.abs(audio - x)) <= 1.5 / 32768


@pytest.mark.parametrize("status", [500, 503, 404])
def test_http_errors_are_engine_failures(fake_service, status: int) -> None:
    fake_service.state.fail_status = status
    asr = OpenAIAsr(fake_service.url)
    asr.feed(seconds(0.2))
    with pytest.raises(EngineFailure) as info:
        asr.flush()
    assert info.value.details["service"] == SERVICE == "transcription"
    assert info.value.details["status"] == status
    assert "failing on purpose" in info.value.details["body"]
    assert not asr.in_utterance  # the utterance is over, failed or not
    fake_service.state.fail_status = None
    assert asr.transcribe(seconds(0.2)).text == "heard 0.20 seconds"
    asr.close()


def test_a_rejected_plain_request_is_an_engine_failure(canned_client) -> None:
    formats: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        formats.append(_parse_multipart(request.headers["content-type"], request.read())["response_format"])
        return httpx.Response(422, json={"error": "no"})

    asr = OpenAIAsr("http://unused", client=canned_client(handler))
    with pytest.raises(EngineFailure) as info:
        asr.transcribe(seconds(0.2))
    assert formats == ["verbose_json", "json"] and info.value.details["status"] == 422


def test_a_wrong_api_key_is_an_engine_failure(fake_service) -> None:
    fake_service.state.api_key = "sekrit"
    good = OpenAIAsr(fake_service.url, api_key="sekrit")
    assert good.transcribe(seconds(0.2)).text == "heard 0.20 seconds"
    bad = OpenAIAsr(fake_service.url, api_key="guess")
    with pytest.raises(EngineFailure) as info:
        bad.transcribe(seconds(0.2))
    assert info.value.details["status"] == 401
    good.close()
    bad.close()


def test_an_unreachable_server_is_an_engine_failure(dead_url) -> None:
    asr = OpenAIAsr(dead_url, timeout=2.0)
    with pytest.raises(EngineFailure) as info:
        asr.transcribe(seconds(0.2))
    assert info.value.details == {"service": "transcription"} and "unreachable" in info.value.message
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    asr.close()


@pytest.mark.parametrize(
    "handler",
    [
        lambda r: httpx.Response(200, text="<html>not json</html>"),
        lambda r: httpx.Response(200, json=["a", "list"]),
        lambda r: httpx.Response(200, json={"words": []}),  # no text
        lambda r: httpx.Response(200, json={"text": 42}),
    ],
)
def test_malformed_answers_are_engine_failures(canned_client, handler) -> None:
    asr = OpenAIAsr("http://unused", client=canned_client(handler))
    with pytest.raises(EngineFailure) as info:
        asr.transcribe(seconds(0.2))
    assert info.value.details["service"] == "transcription"


@pytest.mark.parametrize(
    "words",
    [
        [{"word": "a", "start": 0.0}],  # no end
        [{"word": "a", "start": "soon", "end": 1.0}],
        ["a"],
        [{"word": "a", "start": None, "end": 1.0}],
    ],
)
def test_malformed_word_timings_are_dropped_but_the_text_is_kept(canned_client, words) -> None:
    asr = OpenAIAsr("http://unused", client=canned_client(json_answer({"text": "a", "words": words})))
    final = asr.transcribe(seconds(0.2))
    assert final.text == "a" and final.words == ()


def test_word_texts_are_stripped_and_times_converted_to_ms(canned_client) -> None:
    body = {"text": " Hello there. ", "words": [{"word": " Hello", "start": 0.25, "end": 0.5}]}
    asr = OpenAIAsr("http://unused", client=canned_client(json_answer(body)))
    asr.transcribe(seconds(0.1))  # the second utterance starts at 100 ms of stream time
    final = asr.transcribe(seconds(0.1))
    assert final.text == "Hello there." and final.words == (TimedWord("Hello", 350.0, 600.0),)


def test_a_null_words_field_means_no_timings(canned_client) -> None:
    asr = OpenAIAsr("http://unused", client=canned_client(json_answer({"text": "ok", "words": None})))
    assert asr.transcribe(seconds(0.1)).words == ()


def test_close_closes_the_client(canned_client) -> None:
    client = canned_client(json_answer({"text": "x"}))
    OpenAIAsr("http://unused", client=client).close()
    assert client.is_closed


def test_json_answers_are_parsed_from_the_body_not_the_content_type(canned_client) -> None:
    handler = lambda r: httpx.Response(200, text=json.dumps({"text": "plain"}))  # noqa: E731
    assert OpenAIAsr("http://unused", client=canned_client(handler)).transcribe(seconds(0.1)).text == "plain"
