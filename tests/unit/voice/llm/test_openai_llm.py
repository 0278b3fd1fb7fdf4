"""The OpenAI-compatible chat client against the fake server: streamed deltas, the model picked from
/v1/models, the request body, stop closing the connection, and every remote failure as EngineFailure."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from fake_openai_service import fake_reply
from omnivox.core.config import Settings
from omnivox.core.errors import EngineFailure
from omnivox.protocol.chat import AudioPart, ChatMessage, ImagePart, TextPart
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.openai_llm import SERVICE, OpenAIChatLlm, wire_message
from omnivox.voice.openai_compat import make_client

HISTORY = [
    ChatMessage(role="system", content="Be brief."),
    ChatMessage(role="user", content="What is the weather?"),
]


def sse(*events: object) -> str:
    """A server-sent-event body: one ``data:`` line per event (dicts become JSON)."""
    return "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events)


def delta(text: str) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def canned_sse(canned_client, body: str, model: str | None = "m") -> OpenAIChatLlm:
    client = canned_client(
        lambda r: httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})
    )
    return OpenAIChatLlm("http://unused", model=model, client=client)


def test_the_reply_streams_as_deltas(fake_service) -> None:
    llm = OpenAIChatLlm(fake_service.url)
    deltas = list(llm.stream(HISTORY))
    reply = fake_reply([{"role": "user", "content": "What is the weather?"}])
    assert "".join(deltas) == reply
    assert deltas == [reply[i : i + 3] for i in range(0, len(reply), 3)]  # as the server cut them
    assert llm.complete(HISTORY) == reply
    assert llm.name == "openai" and llm.vision
    llm.close()


def test_the_only_model_served_is_used_and_asked_for_once(fake_service) -> None:
    fake_service.state.models = ["only-one"]
    gets: list[str] = []
    client = make_client(fake_service.url, None, None)
    client.event_hooks["request"].append(lambda r: gets.append(f"{r.method} {r.url.path}"))
    llm = OpenAIChatLlm(fake_service.url, client=client)
    assert llm.model == "only-one"
    llm.complete(HISTORY)
    llm.complete(HISTORY)
    assert gets == ["GET /v1/models", "POST /v1/chat/completions", "POST /v1/chat/completions"]
    assert [r["model"] for r in fake_service.state.requests] == ["only-one", "only-one"]
    llm.close()


@pytest.mark.parametrize("models", [[], ["a", "b"]])
def test_no_single_model_and_none_configured_is_an_engine_failure(fake_service, models) -> None:
    fake_service.state.models = models
    llm = OpenAIChatLlm(fake_service.url)
    with pytest.raises(EngineFailure) as info:
        list(llm.stream(HISTORY))
    assert info.value.details == {"service": SERVICE, "models": models}
    assert fake_service.state.requests == []  # nothing was generated
    llm.close()


def test_a_configured_model_is_used_without_asking(fake_service) -> None:
    fake_service.state.models = ["a", "b"]
    llm = OpenAIChatLlm(fake_service.url + "/v1/", model="b")
    assert llm.list_models() == ["a", "b"]
    llm.complete(HISTORY)
    assert fake_service.state.requests[0]["model"] == "b"
    llm.close()


def test_request_body_carries_only_the_params_that_are_set(fake_service) -> None:
    llm = OpenAIChatLlm(fake_service.url, model="m")
    assert llm.request_body(HISTORY, None) == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is the weather?"},
        ],
        "stream": True,
    }
    params = LlmParams(temperature=0.0, max_tokens=7, top_p=0.9, stop_sequences=("\n", "User:"))
    body = llm.request_body(HISTORY, params)
    assert (body["temperature"], body["max_tokens"], body["top_p"], body["stop"]) == (
        0.0,
        7,
        0.9,
        ["\n", "User:"],
    )
    llm.complete(HISTORY, params)
    sent = fake_service.state.requests[0]
    assert sent["temperature"] == 0.0 and sent["stop"] == ["\n", "User:"] and sent["stream"] is True
    llm.close()


def test_wire_message_of_text_and_text_parts_is_a_string() -> None:
    assert wire_message(ChatMessage(role="user", content="hi")) == {"role": "user", "content": "hi"}
    parts = [TextPart(text="one"), AudioPart(data="AAAA"), TextPart(text="two")]
    assert wire_message(ChatMessage(role="assistant", content=parts)) == {
        "role": "assistant",
        "content": "one two",
    }


def test_wire_message_with_images_uses_content_parts() -> None:
    jpeg, png = "/9j/4AAQSkZJRg", "iVBORw0KGgo"
    content = [
        TextPart(text="what is this"),
        ImagePart(data=jpeg),
        AudioPart(data="AAAA"),
        ImagePart(data=png),
    ]
    assert wire_message(ChatMessage(role="user", content=content)) == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this"},
            {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{jpeg}"}},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
        ],
    }


def test_stop_closes_the_connection_and_the_server_stops_generating(fake_service) -> None:
    fake_service.state.token_delay_s = 0.02
    total = len(fake_reply([{"role": "user", "content": "What is the weather?"}])) // 3 + 1
    llm = OpenAIChatLlm(fake_service.url, model="m")
    stop = threading.Event()
    got = []
    for d in llm.stream(HISTORY, stop=stop):
        got.append(d)
        if len(got) == 2:
            stop.set()  # barge-in
    assert len(got) == 2
    deadline = time.monotonic() + 5
    while not fake_service.state.chat_disconnected and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake_service.state.chat_disconnected
    assert fake_service.state.chat_tokens_sent < total
    llm.close()


def test_a_preset_stop_yields_nothing(fake_service) -> None:
    stop = threading.Event()
    stop.set()
    llm = OpenAIChatLlm(fake_service.url, model="m")
    assert list(llm.stream(HISTORY, stop=stop)) == []
    llm.close()


def test_sse_lines_without_content_are_skipped(canned_client) -> None:
    body = (
        ": keep-alive\n\nevent: message\n"
        + sse(
            {"choices": [{"delta": {"role": "assistant"}}]},  # the role comes first, no content
            delta("Hel"),
            {"choices": [{"delta": {"content": None}}]},
            {"choices": [{"delta": None}]},
            {"choices": [{"index": 0, "finish_reason": "stop"}]},  # no delta at all
            delta(""),
            delta("lo"),
            {"choices": [], "usage": {"completion_tokens": 2}},
            {"choices": None, "usage": {"completion_tokens": 2}},
            {"id": "no choices at all"},
            {"choices": [{"delta": {"content": None}}], "error": None},
        )
        + "data:[DONE]\n\n"
        + sse(delta("after the end"))
    )
    llm = canned_sse(canned_client, body)
    assert list(llm.stream(HISTORY)) == ["Hel", "lo"]


def test_a_stream_that_ends_without_done_just_ends(canned_client) -> None:
    assert canned_sse(canned_client, sse(delta("a"), delta("b"))).complete(HISTORY) == "ab"


@pytest.mark.parametrize(
    "event",
    [
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps("a string"),
        json.dumps({"error": {"message": "out of memory"}}),
        json.dumps({"error": "rate limited"}),
    ],
)
def test_bad_or_error_events_are_engine_failures(canned_client, event: str) -> None:
    llm = canned_sse(canned_client, sse(delta("partial "), event, delta("never")))
    got = []
    with pytest.raises(EngineFailure) as info:
        for d in llm.stream(HISTORY):
            got.append(d)
    assert got == ["partial "] and info.value.details == {"service": "llm"}


def test_the_server_error_message_is_reported(canned_client) -> None:
    llm = canned_sse(canned_client, sse({"error": {"message": "out of memory"}}))
    with pytest.raises(EngineFailure, match="out of memory"):
        llm.complete(HISTORY)


@pytest.mark.parametrize(
    ("chunk", "why"),
    [
        ({"choices": [{"delta": "text"}]}, "'delta' is a str, not an object"),
        ({"choices": {"0": {}}}, "'choices' is a dict, not a list"),
        ({"choices": "abc"}, "'choices' is a str, not a list"),
        ({"choices": 3}, "'choices' is a int, not a list"),
        ({"choices": ["not a dict"]}, "a choice is a str, not an object"),
        ({"choices": [None]}, "a choice is a NoneType, not an object"),
        ({"choices": [{"delta": ["x"]}]}, "'delta' is a list, not an object"),
        ({"choices": [{"delta": {"content": 5}}]}, "'content' is a int, not a string"),
        ({"choices": [{"delta": {"content": ["a"]}}]}, "'content' is a list, not a string"),
    ],
)
def test_malformed_chunks_are_engine_failures(canned_client, chunk: dict, why: str) -> None:
    llm = canned_sse(canned_client, sse(delta("partial "), chunk, delta("never")))
    got = []
    with pytest.raises(EngineFailure, match="malformed") as info:
        for d in llm.stream(HISTORY):
            got.append(d)
    assert got == ["partial "] and info.value.details == {"service": "llm"}
    assert why in str(info.value)


def test_deeply_nested_json_is_an_engine_failure(canned_client) -> None:
    with pytest.raises(EngineFailure, match="not JSON"):
        canned_sse(canned_client, sse("[" * 100_000 + "]" * 100_000)).complete(HISTORY)


def test_an_error_without_a_message_is_reported_whole(canned_client) -> None:
    with pytest.raises(EngineFailure, match=r"code.*42"):
        canned_sse(canned_client, sse({"error": {"code": 42}})).complete(HISTORY)


@pytest.mark.parametrize("status", [400, 401, 500, 503])
def test_http_errors_are_engine_failures(fake_service, status: int) -> None:
    fake_service.state.fail_status = status
    llm = OpenAIChatLlm(fake_service.url, model="m")
    with pytest.raises(EngineFailure) as info:
        llm.complete(HISTORY)
    assert info.value.details["status"] == status and "failing on purpose" in info.value.details["body"]
    llm.close()


def test_the_api_key_is_sent(fake_service) -> None:
    fake_service.state.api_key = "sk-llm"
    good = OpenAIChatLlm(fake_service.url, api_key="sk-llm")
    assert good.model == "fake-model" and good.complete(HISTORY)
    bad = OpenAIChatLlm(fake_service.url, api_key="wrong")
    with pytest.raises(EngineFailure) as info:
        bad.list_models()
    assert info.value.details["status"] == 401
    good.close()
    bad.close()


def test_an_unreachable_server_is_an_engine_failure(dead_url) -> None:
    llm = OpenAIChatLlm(dead_url, model="m", timeout=2.0)
    with pytest.raises(EngineFailure) as info:
        llm.complete(HISTORY)
    assert info.value.details == {"service": "llm"} and "unreachable" in info.value.message
    with pytest.raises(EngineFailure):
        llm.list_models()
    llm.close()


def test_a_connection_lost_mid_reply_is_an_engine_failure(canned_client) -> None:
    class Drops(httpx.SyncByteStream):
        def __iter__(self):
            yield sse(delta("one ")).encode()
            raise httpx.RemoteProtocolError("peer closed connection")

    client = canned_client(lambda r: httpx.Response(200, stream=Drops()))
    got = []
    with pytest.raises(EngineFailure):
        for d in OpenAIChatLlm("http://unused", model="m", client=client).stream(HISTORY):
            got.append(d)
    assert got == ["one "]


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, text="not json"),
        httpx.Response(200, json={"object": "list"}),  # no data
        httpx.Response(200, json={"data": [{"name": "no id"}]}),
        httpx.Response(200, json={"data": ["just-a-string"]}),
        httpx.Response(200, json=[1, 2]),
    ],
)
def test_a_malformed_model_list_is_an_engine_failure(canned_client, answer: httpx.Response) -> None:
    llm = OpenAIChatLlm("http://unused", client=canned_client(lambda r: answer))
    with pytest.raises(EngineFailure, match="malformed"):
        llm.list_models()
    with pytest.raises(EngineFailure):
        _ = llm.model


def test_from_settings(fake_service) -> None:
    with pytest.raises(ValueError, match="llm_url"):
        OpenAIChatLlm.from_settings(Settings(llm_url=None))
    fake_service.state.api_key = "k"
    settings = Settings(llm_url=fake_service.url, llm_model="m1", llm_api_key="k")
    llm = OpenAIChatLlm.from_settings(settings)
    assert llm.base_url == fake_service.url and llm.model == "m1"
    assert llm.complete(HISTORY)  # the key was accepted
    assert fake_service.state.requests[0]["model"] == "m1"
    llm.close()


def test_close_closes_the_client(canned_client) -> None:
    client = canned_client(lambda r: httpx.Response(200))
    OpenAIChatLlm("http://unused", model="m", client=client).close()
    assert client.is_closed


def test_tools_go_out_and_calls_and_usage_come_back_as_events(canned_client) -> None:
    from omnivox.protocol.chat import ToolCall
    from omnivox.voice.llm.base import ToolCallDelta, Usage

    calls = [
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": ""}}]
                    }
                }
            ]
        },
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}}]},
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 12,
                "completion_tokens": 3,
                "prompt_tokens_details": {"cached_tokens": 8},
            },
        },
    ]
    seen: list[dict] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, text=sse(*calls), headers={"content-type": "text/event-stream"})

    llm = OpenAIChatLlm("http://unused", model="m", client=canned_client(answer))
    tool = {
        "type": "function",
        "function": {"name": "f", "description": "", "parameters": {"type": "object"}},
    }
    params = LlmParams(tools=(tool,), tool_choice="required", parallel_tool_calls=False)
    history = [
        *HISTORY,
        ChatMessage(role="assistant", content="", tool_calls=[ToolCall(id="c0", name="f", arguments="{}")]),
        ChatMessage(role="tool", content="done", tool_call_id="c0"),
    ]
    events = list(llm.stream_events(history, params))
    assert events == [
        ToolCallDelta(0, "c1", "f", ""),
        ToolCallDelta(0, None, None, '{"a"'),
        ToolCallDelta(0, None, None, ": 1}"),
        Usage(input_tokens=12, output_tokens=3, cached_tokens=8),
    ]
    body = seen[0]
    assert (body["tools"], body["tool_choice"], body["parallel_tool_calls"]) == ([tool], "required", False)
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][-2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c0", "content": "done"},
    ]
    assert list(llm.stream(history, params)) == []  # text-only readers see no calls
    assert "tools" not in llm.request_body(HISTORY, LlmParams())


def test_a_malformed_tool_call_is_an_engine_failure(canned_client) -> None:
    bad = {"choices": [{"delta": {"tool_calls": {"not": "a list"}}}]}
    with pytest.raises(EngineFailure):
        list(canned_sse(canned_client, sse(bad)).stream_events(HISTORY))
