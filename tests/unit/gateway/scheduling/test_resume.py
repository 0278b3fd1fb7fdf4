"""Resume tokens: a token names its ticket and only the gateways' secret makes one."""

from __future__ import annotations

import pytest

from omnivox.core.errors import InvalidResumeToken
from omnivox.gateway.scheduling.resume import ResumeTokens


def test_a_token_names_its_ticket():
    tokens = ResumeTokens(b"shared")
    assert tokens.ticket_of(tokens.make("t_0123abcd")) == "t_0123abcd"


def test_gateways_sharing_a_secret_read_each_other_s_tokens_and_others_do_not():
    one, two, stranger = ResumeTokens(b"shared"), ResumeTokens(), ResumeTokens(b"other")
    two.use_secret(b"shared")
    token = one.make("t_1")
    assert two.ticket_of(token) == "t_1"
    with pytest.raises(InvalidResumeToken):
        stranger.ticket_of(token)


@pytest.mark.parametrize(
    "token",
    [
        "",
        "t_1",
        "t_1.",
        ".abc",
        "t_1." + "0" * 32,
        "t_1." + "g" * 32,
        "é" * 40,
        "t_1.." + "0" * 32,
        "9" * 5000,
    ],
)
def test_anything_else_is_refused_with_a_clear_error(token):
    with pytest.raises(InvalidResumeToken):
        ResumeTokens(b"shared").ticket_of(token)


def test_a_token_is_not_a_ticket_id_signed_for_another_one():
    tokens = ResumeTokens(b"shared")
    _, sig = tokens.make("t_1").split(".")
    with pytest.raises(InvalidResumeToken):
        tokens.ticket_of(f"t_2.{sig}")
