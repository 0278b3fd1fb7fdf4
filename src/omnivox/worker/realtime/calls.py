"""The function calls one realtime response makes, as the client hears them.

The LLM writes a call in pieces (``ToolCallDelta``: the first names the call and the function, the
rest carry more of its JSON arguments). Each call is an output item of its own:

    response.output_item.added (function_call, in_progress)   conversation.item.added
    response.function_call_arguments.delta ...
    response.function_call_arguments.done                      (also when the response is cut)
    response.output_item.done (completed | incomplete)         conversation.item.done

The client runs the function and answers with a ``function_call_output`` item and a
``response.create``; the reply that follows reads the result (``Conversation.messages``).
"""

from __future__ import annotations

from collections.abc import Callable

from omnivox.core.ids import new_id
from omnivox.protocol.realtime import events as ev
from omnivox.voice.llm.base import ToolCallDelta
from omnivox.worker.realtime.conversation import Conversation, Item
from omnivox.worker.realtime.events import Events


class ResponseCalls:
    def __init__(
        self,
        response_id: str,
        events: Events,
        conversation: Conversation | None,  # None: an out-of-band response (its items join nothing)
        next_index: Callable[[Item], int],  # the output index of a new output item
    ) -> None:
        self.response_id = response_id
        self.events = events
        self.conversation = conversation
        self.next_index = next_index
        self._calls: dict[int, tuple[Item, int]] = {}  # the LLM's call index -> (item, output index)

    def __bool__(self) -> bool:
        return bool(self._calls)

    def piece(self, delta: ToolCallDelta) -> None:
        """One piece of a call: the first opens its item, every one streams its arguments."""
        entry = self._calls.get(delta.index)
        if entry is None:
            item = Item.call(delta.call_id or new_id("call"), delta.name or "", status="in_progress")
            entry = self._calls[delta.index] = (item, self.next_index(item))
            self.events.put(
                ev.OutputItemAdded(response_id=self.response_id, output_index=entry[1], item=item.wire())
            )
            if self.conversation is not None:
                self.conversation.add(item)
                self.conversation.opened(item)
        item, index = entry
        if delta.name and not item.name:
            item.name = delta.name
        if delta.arguments:
            item.arguments += delta.arguments
            self.events.put(
                ev.FunctionCallArgumentsDelta(
                    response_id=self.response_id,
                    output_index=index,
                    item_id=item.id,
                    call_id=item.call_id,
                    delta=delta.arguments,
                )
            )

    def finish(self, completed: bool) -> None:
        """Close every call (``incomplete`` when the response was cut short)."""
        for item, index in self._calls.values():
            item.status = "completed" if completed else "incomplete"
            self.events.put(
                ev.FunctionCallArgumentsDone(
                    response_id=self.response_id,
                    output_index=index,
                    item_id=item.id,
                    call_id=item.call_id,
                    name=item.name,
                    arguments=item.arguments,
                )
            )
            self.events.put(
                ev.OutputItemDone(response_id=self.response_id, output_index=index, item=item.wire())
            )
            if self.conversation is not None:
                self.conversation.closed(item)
