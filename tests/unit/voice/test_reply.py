"""The one reply producer: LLM deltas -> whole words -> sentences -> cleaned text -> TTS audio."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import numpy as np

from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import ChatLlm, LlmParams
from omnivox.voice.reply import FirstToken, ReplyRequest, Spoken, Word, produce_reply
from omnivox.voice.tts.base import StreamingTts


class DeltaLlm(ChatLlm):
    """Streams fixed deltas (split mid-word, as real tokenizers do); stop checked between them."""

    def __init__(self, deltas: list[str], on_delta=None) -> None:
        self.deltas = deltas
        self.on_delta = on_delta or (lambda i: None)

    def stream(
        self, messages: Sequence[ChatMessage], params: LlmParams | None = None, stop=None
    ) -> Iterator[str]:
        for i, delta in enumerate(self.deltas):
            if stop is not None and stop.is_set():
                return
            self.on_delta(i)
            yield delta


class PiecesTts(StreamingTts):
    """Two audio pieces per sentence, 10 samples per character; records what it was asked."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def _synthesize(self, text: str, voice: str, stop: threading.Event, speed: float) -> Iterator[np.ndarray]:
        self.said.append(text)
        n = 10 * len(text)
        yield np.full(n // 2, 0.1, np.float32)
        yield np.full(n - n // 2, 0.1, np.float32)


def request(speak: bool = True) -> ReplyRequest:
    return ReplyRequest([ChatMessage(role="user", content="hi")], LlmParams(), speak=speak, voice="x")


DELTAS = ["Par", "is is ", "lovely. **Go", "** there", " in spring! *smi", "les*"]


def test_words_are_whole_and_rejoin_to_the_reply_and_sentences_are_spoken_cleaned() -> None:
    tts = PiecesTts()
    clock = iter(range(100)).__next__
    pieces = list(produce_reply(DeltaLlm(DELTAS), tts, request(), threading.Event(), clock=clock))
    assert isinstance(pieces[0], FirstToken) and pieces[0].after_s == 1
    words = [p.text for p in pieces if isinstance(p, Word)]
    assert "".join(words) == "".join(DELTAS)
    assert words[:3] == ["Paris", " is", " lovely."]  # never half a word
    spoken = [p for p in pieces if isinstance(p, Spoken)]
    assert tts.said == ["Paris is lovely.", "Go there in spring!"]  # markdown and stage directions gone
    assert [p.starts_sentence for p in spoken] == [True, False, True, False]
    assert [p.text for p in spoken] == ["Paris is lovely."] * 2 + ["Go there in spring!"] * 2
    assert sum(len(p.audio) for p in spoken[:2]) == 10 * len("Paris is lovely.")
    # the first sentence is spoken before the LLM has written the second
    first_audio = pieces.index(spoken[0])
    assert first_audio < max(i for i, p in enumerate(pieces) if isinstance(p, Word))


def test_the_first_words_go_to_the_tts_as_the_token_after_them_begins() -> None:
    # the third word is known whole when the fourth's token begins: its audio is made before the
    # LLM is asked for a fifth (not once the fourth word is whole too)
    asked: list[int] = []
    tts = PiecesTts()
    llm = DeltaLlm(["The", " weather", " in", " Par", "is", " today", " is", " fine."], asked.append)
    pieces = produce_reply(llm, tts, request(), threading.Event())
    first = next(p for p in pieces if isinstance(p, Spoken))
    assert first.text == "The weather in" and tts.said == ["The weather in"]
    assert asked == [0, 1, 2, 3]  # " Par" has come; "is" and " today" not yet


def test_text_only_replies_have_no_speech() -> None:
    tts = PiecesTts()
    pieces = list(produce_reply(DeltaLlm(DELTAS), tts, request(speak=False), threading.Event()))
    assert not any(isinstance(p, Spoken) for p in pieces) and tts.said == []
    assert "".join(p.text for p in pieces if isinstance(p, Word)) == "".join(DELTAS)
    no_tts = list(produce_reply(DeltaLlm(DELTAS), None, request(speak=True), threading.Event()))
    assert not any(isinstance(p, Spoken) for p in no_tts)


def test_nothing_is_said_after_stop_not_even_a_held_back_word() -> None:
    stop = threading.Event()
    tts = PiecesTts()
    llm = DeltaLlm(["One two thr", "ee. Four five"], on_delta=lambda i: stop.set() if i == 1 else None)
    pieces = list(produce_reply(llm, tts, request(), stop))
    words = [p.text for p in pieces if isinstance(p, Word)]
    assert words == ["One", " two"]  # "three." was completed by the delta that came with the stop
    assert tts.said == []


def test_a_stop_while_speaking_ends_within_one_piece() -> None:
    stop = threading.Event()

    class StoppingTts(PiecesTts):
        def _synthesize(self, text, voice, stop_event, speed):
            yield np.zeros(10, np.float32)
            stop.set()
            yield np.zeros(10, np.float32)

    pieces = list(produce_reply(DeltaLlm(["Hello there. ", "More words."]), StoppingTts(), request(), stop))
    assert len([p for p in pieces if isinstance(p, Spoken)]) == 1


def test_an_empty_reply_yields_no_first_token_and_nothing_else() -> None:
    assert list(produce_reply(DeltaLlm([]), PiecesTts(), request(), threading.Event())) == []


def test_the_embedded_echo_llm_and_hibari_make_a_spoken_reply(hibari_tts) -> None:
    from omnivox.voice.llm.echo_llm import EchoLlm

    req = ReplyRequest([ChatMessage(role="user", content="open the window")], LlmParams(), speak=True)
    pieces = list(produce_reply(EchoLlm(), hibari_tts, req, threading.Event()))
    text = "".join(p.text for p in pieces if isinstance(p, Word))
    audio = np.concatenate([p.audio for p in pieces if isinstance(p, Spoken)])
    assert text == "You said: open the window"
    assert len(audio) > 24000 * 0.5 and float(np.abs(audio).max()) > 0.05


class DownLlm(ChatLlm):
    """An LLM server that cannot be reached: fails at once, or after ``words``."""

    def __init__(self, words: list[str] | None = None) -> None:
        self.words = words or []

    def stream(self, messages: Sequence[ChatMessage], params: LlmParams | None = None, stop=None):
        yield from self.words
        raise ConnectionError("connection refused")


def test_a_reply_that_fails_before_its_first_word_is_an_apology_said_out_loud() -> None:
    from omnivox.voice.reply import ReplyFailed, with_apology

    tts = PiecesTts()
    ask = ReplyRequest(
        [ChatMessage(role="user", content="hi")], LlmParams(), voice="x", apology="Sorry. Try later."
    )
    stop = threading.Event()
    pieces = list(with_apology(produce_reply(DownLlm(), tts, ask, stop), tts, ask, stop))
    assert isinstance(pieces[0], ReplyFailed) and isinstance(pieces[0].error, ConnectionError)
    assert "".join(p.text for p in pieces if isinstance(p, Word)) == "Sorry. Try later."
    assert tts.said == ["Sorry.", "Try later."]  # spoken, sentence by sentence
    assert [p.starts_sentence for p in pieces if isinstance(p, Spoken)] == [True, False, True, False]


def test_a_reply_that_fails_midway_or_with_no_apology_set_fails() -> None:
    import pytest

    from omnivox.voice.reply import with_apology

    tts = PiecesTts()
    stop = threading.Event()
    midway = ReplyRequest([], LlmParams(), speak=False, apology="Sorry.")
    with pytest.raises(ConnectionError):
        list(with_apology(produce_reply(DownLlm(["It ", "is "]), tts, midway, stop), tts, midway, stop))
    silent = ReplyRequest([], LlmParams(), speak=False)
    with pytest.raises(ConnectionError):
        list(with_apology(produce_reply(DownLlm(), tts, silent, stop), tts, silent, stop))
    assert tts.said == []
