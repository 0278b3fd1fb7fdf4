"""A realtime session's events to its client: in order, under the names the client speaks.

Events go into the connection's outbox. Audio deltas are tagged with their response's id and weighed
in milliseconds of audio, so a cancelled response's unsent audio can be dropped at once and the
sender's count of audio sent stays true. Clients that speak the beta protocol (``OpenAI-Beta:
realtime=v1``) get the beta event names. omnivox's own events go to a client that asked for them, and
always to a gateway (which withholds them from clients that did not ask, after its recording saw them).
"""

from __future__ import annotations

import json

from omnivox.connection.runtime import Connection
from omnivox.protocol.realtime.events import BETA_SERVER_TYPES, ExtensionEvent
from omnivox.protocol.wire import Msg


class Events:
    def __init__(self, conn: Connection, beta: bool = False, extensions: bool = True) -> None:
        self.conn = conn
        self.beta = beta
        self.extensions = extensions  # omnivox's own events go out (else they are dropped here)

    def put(self, event: Msg, *, response_id: str | None = None, audio_ms: float = 0.0) -> None:
        if isinstance(event, ExtensionEvent) and not self.extensions:
            return
        self.conn.send(self.encode(event), tag=response_id, weight=audio_ms)

    def encode(self, event: Msg) -> str:
        if self.beta and (beta := BETA_SERVER_TYPES.get(getattr(event, "type", ""))):
            data = event.model_dump(mode="json")
            data["type"] = beta
            return json.dumps(data, separators=(",", ":"))
        return event.model_dump_json()

    def drop_audio(self, response_id: str) -> float:
        """Drop the unsent audio deltas of ``response_id``; returns the milliseconds dropped."""
        return self.conn.outbox.drop(response_id)
