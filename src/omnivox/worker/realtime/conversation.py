"""The conversation of one realtime session: ordered items, their events, and the LLM's view of them.

Items are messages, function calls the assistant made, and the outputs clients give them. A user
message may carry images (``input_image``), shown to an LLM that sees (the last ``KEEP_IMAGES``
items' images are kept; older ones are dropped, as a context window would). Spoken
items keep their transcript (user: what the ASR heard; assistant: what was said, cut to what the
user heard when interrupted: the playout ledger's ``Playback`` of the reply says which words that
was) and never their audio: the cascade's LLM reads text, and holding audio would grow memory with
the call.

The conversation sends its own item events (``conversation.item.*``, ``committed``, the
transcription's ``completed``), each with the id of the item before it at the time it was placed.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from omnivox.agent.playout import Playback
from omnivox.core.errors import (
    CallNotFound,
    DeleteItemNotFound,
    InvalidMessage,
    ItemExists,
    ItemNotFound,
    RetrieveItemNotFound,
    TruncateItemNotFound,
)
from omnivox.core.ids import new_id
from omnivox.protocol.chat import ChatMessage, ImagePart, TextPart, ToolCall
from omnivox.protocol.realtime import events as ev
from omnivox.protocol.realtime.wire import ItemIn
from omnivox.protocol.wire import Msg
from omnivox.voice.tool_calls import ToolResult

Role = Literal["user", "assistant", "system"]
Status = Literal["completed", "incomplete", "in_progress"]
Kind = Literal[
    "message",
    "function_call",
    "function_call_output",
    "mcp_list_tools",
    "mcp_call",
    "mcp_approval_request",
    "mcp_approval_response",
]
DENIED = "the user did not approve this call"  # what the LLM reads of a call the client refused


KEEP_IMAGES = 4  # items whose images the conversation holds (each may be megabytes)
IMAGE_TYPES = {"image/png", "image/jpeg"}

# How far past a finished item's audio a truncation may name (clamped to its end): clients count
# what they played in their own units and clocks.
TRUNCATE_SLACK_MS = 500


def item_id() -> str:
    return new_id("item")


def image_url(data: str) -> str:
    """An image's base64 as the data URL it came in."""
    return f"data:{'image/jpeg' if data.startswith('/9j/') else 'image/png'};base64,{data}"


def item_images(spec: ItemIn) -> list[str]:
    """The images of a client-made item, as base64; each must be a data URL of a PNG or JPEG."""
    out = []
    for n, part in enumerate(spec.content):
        if part.type != "input_image":
            continue
        url = part.image_url or ""
        head, _, data = url.partition(";base64,")
        if not head.startswith("data:") or head[5:] not in IMAGE_TYPES or not data:
            raise InvalidMessage(
                "an input_image is a data URL of a PNG or JPEG image (data:image/png;base64,...)",
                param=f"item.content.{n}.image_url",
            )
        try:
            base64.b64decode(data, validate=True)
        except ValueError:
            raise InvalidMessage(
                "the image is not valid base64", param=f"item.content.{n}.image_url"
            ) from None
        out.append(data)
    return out


def item_text(spec: ItemIn) -> str:
    """The text of a client-made item: its text parts and any transcripts it carries."""
    texts = [c.text or c.transcript or "" for c in spec.content if c.type != "input_image"]
    return " ".join(t.strip() for t in texts if t and t.strip())


@dataclass
class Item:
    role: Role
    audio: bool  # spoken (input_audio / output_audio) rather than typed
    text: str = ""  # the text, or the transcript of the audio
    status: Status = "completed"
    id: str = ""
    type: Kind = "message"
    call_id: str = ""  # function_call / function_call_output: the call
    name: str = ""  # function_call: the function
    arguments: str = ""  # function_call: its JSON arguments
    output: str = ""  # function_call_output: what the function returned (mcp_call: the tool)
    images: list[str] | None = None  # a user message's images (base64 PNG or JPEG)
    run_async: bool = False  # function_call: the reply did not wait for it (its output starts one)
    # MCP items (``worker.realtime.mcp``): the server, its tools, a call's error, its approval
    server_label: str = ""
    tools: list[dict[str, Any]] | None = None  # mcp_list_tools
    error: dict[str, Any] | None = None  # mcp_call: why it failed
    approval_request_id: str = ""  # mcp_call, mcp_approval_response: the request it answers
    approve: bool | None = None  # mcp_approval_response
    reason: str | None = None  # mcp_approval_response
    # assistant audio a response of this session says: the ledger's record of it (sent, heard)
    playback: Playback | None = None

    def __post_init__(self) -> None:
        self.id = self.id or item_id()

    @property
    def audio_ms(self) -> float:
        """Assistant audio sent (once truncated: heard), the bound for ``conversation.item.truncate``."""
        return self.playback.audio_ms if self.playback is not None else 0.0

    @classmethod
    def call(cls, call_id: str, name: str, arguments: str = "", **kw: Any) -> Item:
        return cls(
            "assistant", False, type="function_call", call_id=call_id, name=name, arguments=arguments, **kw
        )

    @classmethod
    def call_output(cls, call_id: str, output: str, **kw: Any) -> Item:
        return cls("user", False, type="function_call_output", call_id=call_id, output=output, **kw)

    def truncate(self, heard_ms: float) -> None:
        """Keep only what was heard: the text, and the audio length (later truncations bound to it).
        Audio this session did not say (a client's item) has no heard words to keep."""
        self.text = self.playback.truncate(heard_ms) if self.playback is not None else ""

    def wire(self) -> dict[str, Any]:
        head = {"id": self.id, "object": "realtime.item", "type": self.type, "status": self.status}
        if self.type.startswith("mcp_"):
            return {**head, **self._mcp_wire()}
        if self.type == "function_call":
            return {**head, "call_id": self.call_id, "name": self.name, "arguments": self.arguments}
        if self.type == "function_call_output":
            return {**head, "call_id": self.call_id, "output": self.output}
        part: dict[str, str | None]
        if self.role == "assistant":
            part = (
                {"type": "output_audio", "transcript": self.text}
                if self.audio
                else {"type": "output_text", "text": self.text}
            )
        elif self.audio:
            part = {"type": "input_audio", "transcript": self.text or None}
        else:
            part = {"type": "input_text", "text": self.text}
        images = [{"type": "input_image", "image_url": image_url(i)} for i in self.images or []]
        return {
            "id": self.id,
            "object": "realtime.item",
            "type": "message",
            "status": self.status,
            "role": self.role,
            "content": [part, *images],
        }

    def chat(self, vision: bool) -> ChatMessage:
        """A message item as the LLM reads it (with its images when it sees)."""
        if not (vision and self.images):
            return ChatMessage(role=self.role, content=self.text)
        parts: list[TextPart | ImagePart] = [TextPart(text=self.text)] if self.text else []
        return ChatMessage(role=self.role, content=[*parts, *(ImagePart(data=i) for i in self.images)])

    def _mcp_wire(self) -> dict[str, Any]:
        if self.type == "mcp_list_tools":
            return {"server_label": self.server_label, "tools": self.tools or []}
        if self.type == "mcp_approval_response":
            return {
                "approval_request_id": self.approval_request_id,
                "approve": bool(self.approve),
                "reason": self.reason,
            }
        call = {"server_label": self.server_label, "name": self.name, "arguments": self.arguments}
        if self.type == "mcp_approval_request":
            return call
        ran = self.status == "completed" and self.error is None  # an output only once it has one
        return {
            **call,
            "approval_request_id": self.approval_request_id or None,
            "output": self.output if ran else None,
            "error": self.error,
        }


class Conversation:
    def __init__(self, emit: Callable[[Msg], None] = lambda event: None) -> None:
        self._items: list[Item] = []
        self._previous: dict[str, str | None] = {}  # item id -> the item before it when placed
        self.emit = emit
        self.transcribing = False  # the session asked for input transcription events

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Item]:
        return iter(self._items)

    @property
    def last_id(self) -> str | None:
        return self._items[-1].id if self._items else None

    def get(self, item_id: str, missing: type[ItemNotFound] = ItemNotFound) -> Item:
        return self._items[self._index(item_id, "item_id", missing)]

    def previous_of(self, item: Item) -> str | None:
        return self._previous.get(item.id)

    def messages(self, instructions: str, tools: bool = False, vision: bool = False) -> list[ChatMessage]:
        """What the LLM is given: the instructions, then every item that has text (or, for an LLM
        that sees, ``vision``, images), in order.

        With ``tools`` (an LLM that calls functions) a call is an assistant message's ``tool_calls``
        with its output right after it as a ``tool`` message (chat completions refuse them apart),
        and a call still waiting for its output is left out. Without, calls and outputs are told
        in words, so the model still knows what happened."""
        out = [ChatMessage(role="system", content=instructions)] if instructions else []
        outputs = {i.call_id: i.output for i in self._items if i.type == "function_call_output"}
        answers = {i.approval_request_id: i for i in self._items if i.type == "mcp_approval_response"}
        for item in self._items:
            if item.type == "mcp_call" and item.status != "in_progress":
                outputs[item.call_id] = _mcp_output(item)
            elif item.type == "mcp_approval_request":
                answer = answers.get(item.id)
                if answer is not None and not answer.approve:  # approved ones are run as mcp_calls
                    outputs[item.call_id] = DENIED
        for item in self._items:
            if item.type == "message":
                if item.text.strip() or (vision and item.images):
                    out.append(item.chat(vision))
            elif item.type in ("function_call_output", "function_call") and not tools:
                out.append(_told(item))
            elif item.type in _CALLS and (answer_text := outputs.get(item.call_id)) is not None:
                call = ToolCall(id=item.call_id, name=item.name, arguments=item.arguments)
                out.append(ChatMessage(role="assistant", content="", tool_calls=[call]))
                out.append(ChatMessage(role="tool", content=answer_text, tool_call_id=call.id))
        return _group_parallel(out)

    def approval_request(self, request_id: str) -> Item:
        """The ``mcp_approval_request`` an ``mcp_approval_response`` answers (once)."""
        item = next((i for i in self._items if i.id == request_id and i.type == "mcp_approval_request"), None)
        if item is None:
            raise ItemNotFound(
                f"no mcp_approval_request with id {request_id!r}", param="item.approval_request_id"
            )
        if any(
            i.type == "mcp_approval_response" and i.approval_request_id == request_id for i in self._items
        ):
            raise InvalidMessage(
                f"approval request {request_id!r} already has a response", param="item.approval_request_id"
            )
        return item

    def call_named(self, call_id: str) -> Item | None:
        return next((i for i in self._items if i.type == "function_call" and i.call_id == call_id), None)

    def check_output(self, call_id: str) -> Item:
        """The call a ``function_call_output`` answers: one that was made, answered only once."""
        call = self.call_named(call_id)
        if call is None:
            raise CallNotFound(f"no function call with call_id {call_id!r} was made", param="item.call_id")
        if any(i.type == "function_call_output" and i.call_id == call_id for i in self._items):
            raise InvalidMessage(f"call {call_id!r} already has an output", param="item.call_id")
        return call

    # ---- changes (quiet: callers that announce them use the methods below)

    def add(self, item: Item, previous_item_id: str | None = None) -> str | None:
        """Insert ``item`` after ``previous_item_id`` ("root": first; None: last); returns the id of
        the item before it. Raises ``ItemNotFound`` for an unknown ``previous_item_id``."""
        if any(i.id == item.id for i in self._items):
            raise ItemExists(f"an item with id {item.id!r} already exists", param="item.id")
        if previous_item_id is None:
            before = self.last_id
            self._items.append(item)
        elif previous_item_id == "root":
            before = None
            self._items.insert(0, item)
        else:
            before = previous_item_id
            self._items.insert(self._index(previous_item_id, "previous_item_id") + 1, item)
        self._previous[item.id] = before
        return before

    def delete(self, item_id: str) -> None:
        del self._items[self._index(item_id, "item_id", DeleteItemNotFound)]
        self._previous.pop(item_id, None)
        self.emit(ev.ItemDeleted(item_id=item_id))

    # ---- changes the client hears of

    def commit_user_turn(self, item_id_: str, transcript: str) -> Item:
        """The user's spoken turn: ``committed``, the item (pending, then done) and its transcript."""
        item = Item(role="user", audio=True, text=transcript.strip(), id=item_id_)
        previous = self.add(item)
        self.emit(ev.Committed(item_id=item.id, previous_item_id=previous))
        pending = Item(role="user", audio=True, text="", id=item.id, status="in_progress")
        self.emit(ev.ItemAdded(previous_item_id=previous, item=pending.wire()))
        if self.transcribing:
            self.emit(ev.TranscriptionCompleted(item_id=item.id, transcript=item.text))
        self.emit(ev.ItemDone(previous_item_id=previous, item=item.wire()))
        return item

    def create(self, item: Item, previous_item_id: str | None) -> None:
        """An item the client made (``conversation.item.create``)."""
        previous = self.add(item, previous_item_id)
        if item.images:
            self._forget_old_images()
        self.emit(ev.ItemAdded(previous_item_id=previous, item=item.wire()))
        if item.audio and item.role == "user" and self.transcribing:
            self.emit(ev.TranscriptionCompleted(item_id=item.id, transcript=item.text))
        self.emit(ev.ItemDone(previous_item_id=previous, item=item.wire()))

    def opened(self, item: Item) -> None:
        """An assistant item a response starts filling."""
        self.emit(ev.ItemAdded(previous_item_id=self.previous_of(item), item=item.wire()))

    def closed(self, item: Item) -> None:
        self.emit(ev.ItemDone(previous_item_id=self.previous_of(item), item=item.wire()))

    def retrieve(self, item_id: str) -> None:
        self.emit(ev.ItemRetrieved(item=self.get(item_id, RetrieveItemNotFound).wire()))

    def truncate(self, item: Item, heard_ms: float) -> None:
        """Keep what the user heard of an assistant item's audio (a barge-in or a client's word)."""
        item.truncate(heard_ms)
        self.emit(ev.ItemTruncated(item_id=item.id, audio_end_ms=int(heard_ms)))

    def check_truncation(self, item_id: str, audio_end_ms: int) -> tuple[Item, float]:
        """The item a client's ``conversation.item.truncate`` names and where it is cut, if that
        truncation is valid. A reply still being sent is cut at any point up to what was sent (the
        client cannot have heard more; its clock may run a little ahead); a finished one within
        ``TRUNCATE_SLACK_MS`` of its end (clamped), and past that it is an error."""
        item = self.get(item_id, TruncateItemNotFound)
        if item.role != "assistant" or not item.audio:
            raise InvalidMessage("only assistant audio items can be truncated", param="item_id")
        if item.status != "in_progress" and audio_end_ms > item.audio_ms + TRUNCATE_SLACK_MS:
            raise InvalidMessage(
                f"audio_end_ms {audio_end_ms} is past the item's {math.ceil(item.audio_ms)} ms of audio",
                param="audio_end_ms",
            )
        return item, min(float(audio_end_ms), item.audio_ms)

    def _forget_old_images(self) -> None:
        with_images = [i for i in self._items if i.images]
        for old in with_images[:-KEEP_IMAGES]:
            old.images = None

    def remove(self, item: Item) -> None:
        """Take out an item the client never heard of (quietly)."""
        if item in self._items:
            self._items.remove(item)
            self._previous.pop(item.id, None)

    def _index(self, item_id: str, param: str, missing: type[ItemNotFound] = ItemNotFound) -> int:
        for n, item in enumerate(self._items):
            if item.id == item_id:
                return n
        raise missing(f"no conversation item with id {item_id!r}", param=param)


_CALLS = ("function_call", "mcp_call", "mcp_approval_request")


def _mcp_output(call: Item) -> str:
    error = call.error
    if error is None and call.status == "incomplete":  # cut before it ended
        error = {"message": "the call was abandoned: the reply was cut"}
    return ToolResult(call.call_id, call.output, error).for_llm()


def _told(item: Item) -> ChatMessage:
    """A function call or its output in words, for an LLM that cannot call functions."""
    if item.type == "function_call":
        return ChatMessage(role="assistant", content=f"(I called {item.name} with {item.arguments or '{}'})")
    return ChatMessage(role="user", content=f"(the function returned: {item.output})")


def _group_parallel(messages: list[ChatMessage]) -> list[ChatMessage]:
    """assistant(call a), tool(a), assistant(call b), tool(b) -> assistant(calls a, b), tool(a), tool(b):
    the parallel calls of one turn as chat completions expect them."""
    out: list[ChatMessage] = []
    for m in messages:
        if m.tool_calls and not m.text() and out and out[-1].role == "tool":
            k = len(out) - 1
            while k >= 0 and out[k].role == "tool":
                k -= 1
            head = out[k] if k >= 0 else None
            if head is not None and head.tool_calls:
                head.tool_calls.extend(m.tool_calls)
                continue
        out.append(m)
    return out
