"""Conversation history under a token budget: what is always kept, what goes first, and the
user-first rule; the approximate token count; the first-reply temperature."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from omnivox.protocol.chat import ChatMessage, ImagePart, TextPart
from omnivox.voice.llm.history import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_TOKENS,
    ReplyTemperature,
    approx_tokens,
    history_tokens,
    message_tokens,
    trim_history,
)


def m(role: str, chars: int = 4, tag: str = "") -> ChatMessage:
    """A message costing ``ceil(chars / 4) + 4`` tokens; ``tag`` makes it recognisable."""
    text = (tag + "x" * chars)[:chars] if chars else ""
    return ChatMessage(role=role, content=text)


def cost(message: ChatMessage) -> int:
    return message_tokens(message)


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 400, 100)])
def test_approx_tokens_is_four_characters_per_token_rounded_up(text: str, tokens: int) -> None:
    assert approx_tokens(text) == tokens
    assert CHARS_PER_TOKEN == 4.0


def test_message_tokens_add_the_template_overhead_and_count_text_parts_only() -> None:
    assert MESSAGE_OVERHEAD_TOKENS == 4
    assert message_tokens(m("user", 8)) == 2 + 4
    parts = [TextPart(text="abcd"), ImagePart(data="A" * 4000), TextPart(text="efgh")]
    assert message_tokens(ChatMessage(role="user", content=parts)) == approx_tokens("abcd efgh") + 4
    assert history_tokens([m("user", 8), m("assistant", 4)]) == 6 + 5
    assert history_tokens([]) == 0


def test_empty_history_stays_empty() -> None:
    assert trim_history([], 100) == []


def test_a_history_within_budget_is_kept_whole() -> None:
    msgs = [m("system"), m("user"), m("assistant"), m("user")]
    assert trim_history(msgs, history_tokens(msgs)) == msgs


def test_the_oldest_turns_go_first() -> None:
    msgs = [
        m("system", tag="S"),
        *(m(r, tag=str(i)) for i, r in enumerate(["user", "assistant"] * 3)),
        m("user"),
    ]
    # every message costs 5 tokens: room for the system prompt and five more
    kept = trim_history(msgs, 30)
    assert kept == [msgs[0], *msgs[-5:]]
    assert history_tokens(kept) == 30
    # room for four more: the oldest of those would be an assistant turn, so it goes too
    assert trim_history(msgs, 25) == [msgs[0], *msgs[-3:]]


def test_the_system_prompt_and_the_last_message_are_kept_even_over_budget() -> None:
    system, last = m("system", 400), m("user", 400)
    msgs = [system, m("user"), m("assistant"), last]
    assert trim_history(msgs, 10) == [system, last]
    assert trim_history([last], 0) == [last]


def test_several_leading_system_messages_are_all_kept() -> None:
    msgs = [m("system", tag="a"), m("system", tag="b"), m("user", 40), m("assistant", 40), m("user")]
    assert trim_history(msgs, 1) == [msgs[0], msgs[1], msgs[-1]]


def test_a_system_message_later_in_the_history_is_an_ordinary_message() -> None:
    msgs = [m("user", 40), m("system", tag="late"), m("user")]
    assert trim_history(msgs, cost(msgs[1]) + cost(msgs[2])) == msgs[1:]


def test_only_system_messages_keep_the_last_as_the_last_message() -> None:
    msgs = [m("system", tag="a"), m("system", tag="b")]
    assert trim_history(msgs, 0) == msgs


def test_reserve_tokens_leave_room_for_the_reply() -> None:
    msgs = [m("user"), m("assistant"), m("user")]  # 5 tokens each
    assert trim_history(msgs, 15) == msgs
    assert trim_history(msgs, 15, reserve_tokens=5) == msgs[2:]  # the assistant would lead: dropped too


def test_a_kept_history_never_starts_with_an_assistant_turn() -> None:
    msgs = [m("system"), m("user", 40), m("assistant"), m("assistant"), m("user")]
    kept = trim_history(msgs, cost(msgs[0]) + 3 * 5)  # room for the two assistant turns and the last
    assert kept == [msgs[0], msgs[-1]]


def test_an_assistant_last_message_is_kept_alone() -> None:
    msgs = [m("user", 400), m("assistant")]
    assert trim_history(msgs, 5) == [msgs[1]]


def test_an_expensive_middle_message_stops_the_walk_back() -> None:
    # the budget is filled from the end; a message that does not fit ends the kept part, even if
    # older, cheaper messages would still fit (the kept part stays a contiguous recent tail)
    msgs = [m("user"), m("assistant"), m("user", 400), m("assistant"), m("user")]
    assert trim_history(msgs, 30) == msgs[-1:]  # the assistant turn before it cannot lead


ROLES = st.sampled_from(["user", "assistant"])


@st.composite
def histories(draw) -> list[ChatMessage]:
    head = [m("system", draw(st.integers(0, 80)), tag=f"s{i}") for i in range(draw(st.integers(0, 2)))]
    body = [m(draw(ROLES), draw(st.integers(0, 80)), tag=f"b{i}") for i in range(draw(st.integers(1, 8)))]
    return head + body


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, 150), st.integers(0, 30))
def test_trim_invariants(msgs: list[ChatMessage], budget: int, reserve: int) -> None:
    kept = trim_history(msgs, budget, reserve)
    n_system = 0
    while n_system < len(msgs) - 1 and msgs[n_system].role == "system":
        n_system += 1
    head, body = msgs[:n_system], msgs[n_system:]
    assert kept[:n_system] == head  # the prompt, whole
    tail = kept[n_system:]
    assert tail and tail[-1] is msgs[-1]  # the last message, always
    assert tail == body[len(body) - len(tail) :]  # a contiguous recent part, in order
    if len(tail) > 1:
        assert tail[0].role != "assistant"
        assert history_tokens(kept) <= budget - reserve  # over budget only when nothing else is kept
    # maximal: one more message before the kept part would not fit (or would lead as the assistant)
    if len(tail) < len(body):
        longer = body[len(body) - len(tail) - 1 :]
        stripped = longer
        while len(stripped) > 1 and stripped[0].role == "assistant":
            stripped = stripped[1:]
        assert history_tokens(head + longer) > budget - reserve or stripped == tail


def test_trim_returns_a_new_list() -> None:
    msgs = [m("user")]
    kept = trim_history(msgs, 100)
    assert kept == msgs and kept is not msgs
    kept.append(m("user"))
    assert len(msgs) == 1


def test_reply_temperature_is_livelier_before_the_assistant_has_spoken() -> None:
    t = ReplyTemperature()
    assert (t.first, t.later) == (0.7, 0.3)
    assert t.for_history([]) == 0.7
    assert t.for_history([m("system"), m("user")]) == 0.7
    assert t.for_history([m("user"), m("assistant"), m("user")]) == 0.3
    assert ReplyTemperature(first=1.0, later=0.0).for_history([m("assistant")]) == 0.0
