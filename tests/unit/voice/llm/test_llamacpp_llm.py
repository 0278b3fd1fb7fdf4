"""LlamaCppLlm with the real SmolLM2-135M GGUF (98 MB, loads in well under a second), greedy decoding.

The model loads once per session; tests that need the slot empty call ``reset``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from omnivox.core.errors import EngineFailure, UnsupportedContent
from omnivox.protocol.chat import ChatMessage, ImagePart, TextPart
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.llamacpp_llm import LlamaCppLlm, LlamaCppStats, sentence_cut

SYSTEM = ChatMessage(role="system", content="You are a friendly voice assistant. Answer briefly.")
QUESTIONS = [
    "Hi! How are you today?",
    "Can you tell me a fun fact about cats?",
    "And what about dogs?",
    "Thanks, that was nice.",
]


@pytest.fixture(scope="session")
def smollm() -> Iterator[LlamaCppLlm]:
    llm = LlamaCppLlm(threads=1, context_tokens=2048, max_tokens=40)
    yield llm
    llm.close()


@pytest.fixture
def llm(smollm: LlamaCppLlm) -> LlamaCppLlm:
    smollm.reset()
    return smollm


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def test_streams_the_reply_in_deltas(llm):
    deltas = list(llm.stream([SYSTEM, user("Say hello.")]))
    assert deltas and all(isinstance(d, str) and d for d in deltas)
    assert "".join(deltas).strip()
    stats = llm.last_stats
    assert stats.prompt_tokens > 10 and stats.cached_tokens == 0 and stats.new_tokens == stats.prompt_tokens
    assert 0 < stats.generated_tokens <= 40
    assert stats.finish_reason in ("stop", "length")
    assert stats.ttft_ms is not None and stats.ttft_ms > 0


def test_a_new_turn_computes_only_its_new_tokens_and_replies_as_a_full_recompute(llm):
    conversation = [SYSTEM]
    previous: LlamaCppStats | None = None
    for question in QUESTIONS:
        conversation.append(user(question))
        reply = llm.complete(conversation)
        kept = llm.last_stats
        if previous is not None:
            # the whole previous prompt and the previous reply were kept; only the rest is computed
            assert kept.cached_tokens >= previous.prompt_tokens + previous.generated_tokens - 2
            assert kept.new_tokens == kept.prompt_tokens - kept.cached_tokens
            after_reply = kept.prompt_tokens - previous.prompt_tokens - previous.generated_tokens
            assert kept.new_tokens < after_reply + 3
        llm.reset()
        recomputed = llm.complete(conversation)
        full = llm.last_stats
        assert full.cached_tokens == 0 and full.new_tokens == full.prompt_tokens == kept.prompt_tokens
        assert recomputed == reply
        conversation.append(ChatMessage(role="assistant", content=reply))
        previous = kept


def test_new_tokens_stay_flat_as_the_conversation_grows(llm):
    conversation = [SYSTEM]
    news, prompts = [], []
    for question in QUESTIONS * 2:
        conversation.append(user(question))
        conversation.append(ChatMessage(role="assistant", content=llm.complete(conversation)))
        news.append(llm.last_stats.new_tokens)
        prompts.append(llm.last_stats.prompt_tokens)
    assert prompts[-1] > 4 * prompts[0]  # the history grew a lot...
    assert max(news[1:]) < 30  # ...but each turn computed only its question and the template around it


FACT = "Cats sleep for around sixteen hours a day, and they often purr when they are content."


def long_conversation(turns: int) -> list[ChatMessage]:
    said: list[ChatMessage] = [SYSTEM]
    for i in range(turns):
        said += [user(f"{QUESTIONS[i % len(QUESTIONS)]} ({i})"), ChatMessage(role="assistant", content=FACT)]
    return said


def test_a_trimmed_conversation_reuses_the_turns_it_kept_not_only_the_system_prompt():
    """A history trimmed from its oldest turn no longer shares a prefix with the slot past the system
    prompt; llama.cpp shifts the kept turns' states into place instead of recomputing them."""
    fast = LlamaCppLlm(threads=1, context_tokens=2048, max_tokens=40, exact=False)
    try:
        said = long_conversation(6)
        fast.prefill([*said, user("What next?")])
        trimmed = fast.prefill([SYSTEM, *said[3:], user("What next?")]).new_tokens  # the oldest turn gone
        assert fast.last_stats.prompt_tokens > 200
        assert trimmed < 60  # the trimmed place and the new question, not the whole history
    finally:
        fast.close()


def test_an_exact_model_recomputes_a_trimmed_conversation(llm):
    said = long_conversation(3)
    llm.prefill([*said, user("What next?")])
    stats = llm.prefill([SYSTEM, *said[3:], user("What next?")])
    assert stats.new_tokens > stats.prompt_tokens // 2  # bit-identical to a full recompute: no shifting


def test_a_new_session_reuses_only_the_shared_system_prompt(llm):
    first = [SYSTEM, user(QUESTIONS[0])]
    first.append(ChatMessage(role="assistant", content=llm.complete(first)))
    llm.complete([*first, user(QUESTIONS[1])])
    system_only = llm.prefill([SYSTEM]).prompt_tokens  # SYSTEM's render plus the generation prompt
    llm.reset()
    llm.complete(first)  # the last session again, to leave its state in the slot
    other = [SYSTEM, user("What is the tallest mountain in the world?")]
    reply = llm.complete(other)
    reused = llm.last_stats
    # the system prompt and the template's next marker, nothing of the last conversation
    assert system_only - 3 <= reused.cached_tokens <= system_only + 2
    llm.reset()
    assert llm.complete(other) == reply


def test_stop_ends_the_stream_within_one_token(llm):
    stop = threading.Event()
    got = []
    for delta in llm.stream([SYSTEM, user("Tell me a very long story about a dragon.")], stop=stop):
        got.append(delta)
        if len(got) == 2:
            stop.set()
    assert len(got) == 2
    stats = llm.last_stats
    assert stats.finish_reason == "stopped"
    assert stats.generated_tokens <= 3


def test_a_stop_set_before_the_call_yields_nothing(llm):
    stop = threading.Event()
    stop.set()
    assert list(llm.stream([SYSTEM, user("Hello?")], stop=stop)) == []
    assert llm.last_stats.finish_reason == "stopped"


def test_closing_the_iterator_early_frees_the_model_for_the_next_call(llm):
    stream = llm.stream([SYSTEM, user("Tell me a very long story about a dragon.")])
    assert next(stream)
    stream.close()
    assert llm.last_stats.finish_reason == "stopped"
    reply = llm.complete([SYSTEM, user("Say hello.")])
    assert reply.strip()
    assert llm.last_stats.finish_reason in ("stop", "length")


def test_a_stopped_reply_still_leaves_its_prefix_reusable(llm):
    conversation = [SYSTEM, user("Tell me a very long story about a dragon.")]
    stop = threading.Event()
    text = ""
    for delta in llm.stream(conversation, stop=stop):
        text += delta
        if len(text) > 20:
            stop.set()
    first = llm.last_stats
    llm.complete([*conversation, ChatMessage(role="assistant", content=text), user("Shorter, please.")])
    assert llm.last_stats.cached_tokens >= first.prompt_tokens


def test_the_token_cap_ends_the_reply(llm):
    llm.complete([SYSTEM, user("Count from one to one hundred.")], LlmParams(max_tokens=5))
    assert llm.last_stats.generated_tokens <= 5
    assert llm.last_stats.finish_reason == "length"


def test_max_sentences_cuts_the_greedy_reply_after_its_first_sentence(llm, monkeypatch):
    conversation = [SYSTEM, user("Tell me about the moon in three sentences.")]
    full = llm.complete(conversation, LlmParams(max_tokens=60))
    cut = sentence_cut(full, 1)
    assert cut is not None and cut < len(full.rstrip())  # the full reply has more than one sentence
    monkeypatch.setattr(llm, "max_sentences", 1)
    short = llm.complete(conversation, LlmParams(max_tokens=60))
    assert short == full[:cut]
    assert llm.last_stats.finish_reason == "sentences"


@pytest.mark.parametrize(
    ("text", "sentences", "end"),
    [
        ("Hello there. How are", 1, len("Hello there.")),
        ("Hello there. How are you? Fine", 2, len("Hello there. How are you?")),
        ("Hello there.", 1, None),  # no whitespace yet: "there.5" could follow
        ("Pi is 3.14 or so. Yes", 1, len("Pi is 3.14 or so.")),
        ("Dr. Smith is in. Yes", 1, len("Dr. Smith is in.")),
        ("1. Milk\n2. Eggs\n", 1, None),
        ('He said "stop!" and left', 1, len('He said "stop!"')),
        ("Wait... what? No", 2, len("Wait... what?")),
    ],
)
def test_sentence_cut(text, sentences, end):
    assert sentence_cut(text, sentences) == end


def test_request_uses_the_parameters(llm):
    body = llm.request(
        [SYSTEM, user("Hi")], LlmParams(temperature=0.7, max_tokens=9, top_p=0.5, stop_sequences=("\n",))
    )
    assert body["messages"][0] == {"role": "system", "content": SYSTEM.content}
    assert body["temperature"] == 0.7 and body["max_tokens"] == 9 and body["top_p"] == 0.5
    assert body["stop"] == ["\n"] and body["stream"] is True and body["cache_prompt"] is True
    defaults = llm.request([user("Hi")])
    assert defaults["temperature"] == 0.0 and defaults["max_tokens"] == 40


def test_text_parts_are_text_but_images_are_refused(llm):
    parts = ChatMessage(role="user", content=[TextPart(text="Say "), TextPart(text="hello.")])
    assert llm.request([parts])["messages"][0]["content"] == "Say hello."
    image = ChatMessage(role="user", content=[TextPart(text="What is this?"), ImagePart(data="aGVsbG8=")])
    with pytest.raises(UnsupportedContent):
        llm.stream([image])


def test_a_conversation_longer_than_the_context_is_an_engine_failure(llm):
    with pytest.raises(EngineFailure, match="context"):
        llm.complete([user("word " * 3000)])
    assert llm.complete([SYSTEM, user("Say hello.")]).strip()  # still usable


def test_prefill_brings_the_slot_to_the_conversation(llm):
    conversation = [SYSTEM, user("What is the capital of France?")]
    stats = llm.prefill(conversation)
    assert stats.prompt_tokens > 10 and stats.new_tokens == stats.prompt_tokens
    llm.complete(conversation)
    assert llm.last_stats.new_tokens <= 1
    assert llm.last_stats.cached_tokens == stats.prompt_tokens - llm.last_stats.new_tokens


def test_a_turn_prefilled_while_the_user_speaks_computes_only_the_words_after_and_the_tail(llm):
    history = [SYSTEM, user(QUESTIONS[0]), ChatMessage(role="assistant", content="I am fine, thanks.")]
    reply = llm.complete([*history, user("Can you tell me a fun fact about cats?")])
    llm.prefill_turn([*history, user("Can you tell me a fun")])  # the words settled so far
    llm.complete([*history, user("Can you tell me a fun fact about cats?")])
    kept = llm.last_stats
    assert kept.new_tokens <= 12  # "fact about cats?" and the template's tail, not the question
    assert kept.cached_tokens >= kept.prompt_tokens - 12
    llm.reset()
    assert llm.complete([*history, user("Can you tell me a fun fact about cats?")]) == reply  # same words


def test_a_prefill_rolls_back_a_reply_that_was_prepared_then_discarded(llm):
    history = [SYSTEM, user(QUESTIONS[0])]
    prefilled = llm.prefill([*history, user("Call my")])  # its render, generation prompt included
    llm.complete([*history, user("Call my")])  # a reply prepared in a pause, its words in the slot
    llm.prefill_turn([*history, user("Call my")])  # the user went on: back to their words
    rolled = llm.last_stats
    assert rolled.prompt_tokens == prefilled.prompt_tokens  # none of the reply's words are kept
    assert rolled.new_tokens <= 1  # and nothing else was computed again
    llm.complete([*history, user("Call my sister, please.")])
    assert llm.last_stats.new_tokens <= 12


# SmolLM2's chat template closes a user turn and opens the reply in six tokens ("<|im_end|>\n"
# "<|im_start|>assistant\n" as llama.cpp tokenizes it): every prefill ends with them, so a reply after
# one computes them again after its new words, and nothing more
TEMPLATE_END = 6


def test_the_reply_after_a_prefill_computes_exactly_its_new_words_and_the_template_end(llm):
    history = [SYSTEM, user(QUESTIONS[0]), ChatMessage(role="assistant", content="I am fine, thanks.")]
    prefilled = llm.prefill([*history, user("Can you tell me a fun")])
    llm.complete([*history, user("Can you tell me a fun fact about cats?")])
    reply = llm.last_stats
    words = reply.prompt_tokens - prefilled.prompt_tokens  # " fact", " about", " cats", "?"
    assert words == 4
    assert reply.new_tokens == words + TEMPLATE_END
    assert reply.cached_tokens == prefilled.prompt_tokens - TEMPLATE_END


def test_calls_from_two_threads_take_turns(llm):
    results: dict[int, str] = {}

    def ask(i: int) -> None:
        results[i] = llm.complete([SYSTEM, user(QUESTIONS[i])])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert set(results) == {0, 1} and all(r.strip() for r in results.values())


def test_slots_decoding_together_give_each_conversation_the_tokens_it_gets_alone():
    """The pipeline LLM stage's shape (``exact=False``, several slots in one runtime): llama.cpp
    decodes the slots' sequences in one batch per step, and greedy replies must not depend on it."""
    questions = [[SYSTEM, user(q)] for q in QUESTIONS]
    params = [LlmParams(temperature=0.0, max_tokens=24, cache_slot=i) for i in range(len(questions))]

    def fresh() -> LlamaCppLlm:
        return LlamaCppLlm(threads=1, context_tokens=512, max_tokens=24, exact=False, parallel=len(questions))

    first = fresh()
    try:
        alone = [first.complete(q, p) for q, p in zip(questions, params, strict=True)]
    finally:
        first.close()
    together: dict[int, str] = {}
    go = threading.Barrier(len(questions))

    def ask(i: int) -> None:
        go.wait()
        together[i] = second.complete(questions[i], params[i])

    second = fresh()
    try:
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(questions))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        second.close()
    assert all(a.strip() for a in alone) and len(set(alone)) == len(alone)
    assert [together.get(i) for i in range(len(questions))] == alone
