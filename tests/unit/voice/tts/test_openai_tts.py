"""The OpenAI-compatible speech client against the fake server: one request per sentence, PCM16 streamed
back in at-least-20-ms pieces whatever the network chunking, voices, speed, stop and failures."""

from __future__ import annotations

import threading

import httpx
import numpy as np
import pytest

from fake_openai_service import fake_speech
from omnivox.core.errors import EngineFailure
from omnivox.voice.tts.base import SentenceChunker
from omnivox.voice.tts.openai_tts import SERVICE, OpenAITts

MIN_SAMPLES = 480  # 20 ms at 24 kHz


def expected(text: str) -> np.ndarray:
    return fake_speech(text).astype(np.float32) / 32768.0


def test_a_sentence_is_one_request_and_its_audio_arrives_in_pieces(fake_service) -> None:
    tts = OpenAITts(fake_service.url)
    chunks = list(tts.synthesize("Hello there, how are you doing today?"))
    text = "Hello there, how are you doing today?"
    assert {c.text for c in chunks} == {text}
    audio = np.concatenate([c.audio for c in chunks])
    assert audio.dtype == np.float32 and np.array_equal(audio, expected(text))
    assert len(chunks) > 1  # streamed, not one blob at the end
    assert all(len(c.audio) >= MIN_SAMPLES for c in chunks[:-1])
    (req,) = fake_service.state.requests
    assert req == {
        "path": "speech",
        "model": "tts-1",
        "input": text,
        "voice": "alloy",
        "response_format": "pcm",
        "speed": 1.0,
    }
    tts.close()


def test_each_sentence_is_its_own_request_with_cleaned_text(fake_service) -> None:
    tts = OpenAITts(fake_service.url)
    chunker = SentenceChunker(first_clause_words=0)
    chunks = list(tts.stream(["**First** one. ", "Second ", "one 😀!"], chunker=chunker))
    assert [r["input"] for r in fake_service.state.requests] == ["First one.", "Second one!"]
    by_text: dict[str, list[np.ndarray]] = {}
    for c in chunks:
        by_text.setdefault(c.text, []).append(c.audio)
    assert list(by_text) == ["First one.", "Second one!"]
    for text, pieces in by_text.items():
        assert np.array_equal(np.concatenate(pieces), expected(text))
    tts.close()


def test_voices_model_and_speed_go_over_the_wire(fake_service) -> None:
    tts = OpenAITts(
        fake_service.url + "/v1",
        model="kokoro",
        voice="af_heart",
        speed=1.2,
        extra_voices=("bf_emma", "af_heart"),
    )
    assert tts.voices == ("af_heart", "bf_emma")  # the default first, no duplicates
    list(tts.synthesize("One.", voice="bf_emma"))
    list(tts.synthesize("Two.", voice="alloy"))  # not offered: the default
    list(tts.speak("Three.", speed=0.7))
    reqs = fake_service.state.requests
    assert [(r["voice"], r["speed"], r["model"]) for r in reqs] == [
        ("bf_emma", 1.2, "kokoro"),
        ("af_heart", 1.2, "kokoro"),
        ("af_heart", 0.7, "kokoro"),
    ]
    tts.close()


def test_samples_split_across_network_reads_are_reassembled(canned_client) -> None:
    pcm = (np.arange(-600, 600, dtype=np.int16) * 20).astype("<i2").tobytes()

    class Dribble(httpx.SyncByteStream):
        def __iter__(self):
            for i in range(0, len(pcm), 7):  # odd sizes: every other read ends mid-sample
                yield pcm[i : i + 7]

    tts = OpenAITts("http://unused", client=canned_client(lambda r: httpx.Response(200, stream=Dribble())))
    chunks = list(tts.speak("Count."))
    audio = np.concatenate([c.audio for c in chunks])
    assert np.array_equal(audio, np.frombuffer(pcm, "<i2").astype(np.float32) / 32768)
    assert all(len(c.audio) >= MIN_SAMPLES for c in chunks[:-1]) and len(chunks) == 3


def test_a_trailing_odd_byte_is_dropped(canned_client) -> None:
    body = np.array([16384, -16384], "<i2").tobytes() + b"\x01"
    tts = OpenAITts("http://unused", client=canned_client(lambda r: httpx.Response(200, content=body)))
    chunks = list(tts.speak("Two samples."))
    assert [c.audio.tolist() for c in chunks] == [[0.5, -0.5]]


def test_an_empty_answer_is_no_audio(canned_client) -> None:
    tts = OpenAITts("http://unused", client=canned_client(lambda r: httpx.Response(200, content=b"")))
    assert list(tts.speak("Nothing.")) == []


def test_stop_closes_the_response_before_the_rest_arrives(canned_client) -> None:
    stop = threading.Event()
    reads = []

    class Endless(httpx.SyncByteStream):
        def __iter__(self):
            for i in range(1000):
                reads.append(i)
                yield b"\x00\x01" * 600  # 25 ms per read

    tts = OpenAITts("http://unused", client=canned_client(lambda r: httpx.Response(200, stream=Endless())))
    got = []
    for chunk in tts.speak("A very long sentence.", stop=stop):
        got.append(chunk)
        if len(got) == 2:
            stop.set()  # the user barged in
    assert len(got) == 2 and len(reads) <= 4


@pytest.mark.parametrize("status", [400, 500, 503])
def test_http_errors_are_engine_failures(fake_service, status: int) -> None:
    fake_service.state.fail_status = status
    tts = OpenAITts(fake_service.url)
    with pytest.raises(EngineFailure) as info:
        list(tts.synthesize("Hello."))
    assert info.value.details["service"] == SERVICE == "speech"
    assert info.value.details["status"] == status and "failing on purpose" in info.value.details["body"]
    tts.close()


def test_a_server_refusing_pcm_is_an_engine_failure(canned_client) -> None:
    answer = httpx.Response(400, json={"error": {"message": "only mp3"}})
    tts = OpenAITts("http://unused", client=canned_client(lambda r: answer))
    with pytest.raises(EngineFailure) as info:
        list(tts.speak("Hello."))
    assert "only mp3" in info.value.details["body"]


def test_api_key_is_sent_as_a_bearer_token(fake_service) -> None:
    fake_service.state.api_key = "k-123"
    tts = OpenAITts(fake_service.url, api_key="k-123")
    assert len(list(tts.synthesize("Authorised."))) > 0
    nokey = OpenAITts(fake_service.url)
    with pytest.raises(EngineFailure) as info:
        list(nokey.synthesize("Hello."))
    assert info.value.details["status"] == 401
    tts.close()
    nokey.close()


def test_an_unreachable_server_is_an_engine_failure(dead_url) -> None:
    tts = OpenAITts(dead_url, timeout=2.0)
    with pytest.raises(EngineFailure) as info:
        list(tts.synthesize("Hello."))
    assert info.value.details == {"service": "speech"} and isinstance(
        info.value.__cause__, httpx.ConnectError
    )


def test_a_connection_lost_mid_answer_is_an_engine_failure(canned_client) -> None:
    class Drops(httpx.SyncByteStream):
        def __iter__(self):
            yield b"\x00\x00" * 600
            raise httpx.RemoteProtocolError("peer closed connection")

    tts = OpenAITts("http://unused", client=canned_client(lambda r: httpx.Response(200, stream=Drops())))
    got = []
    with pytest.raises(EngineFailure):
        for chunk in tts.speak("Hello."):
            got.append(chunk)
    assert len(got) == 1  # what arrived before the drop was still played


def test_close_closes_the_client(canned_client) -> None:
    client = canned_client(lambda r: httpx.Response(200))
    OpenAITts("http://unused", client=client).close()
    assert client.is_closed
