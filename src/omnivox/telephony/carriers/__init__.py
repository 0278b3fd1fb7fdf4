"""Carrier media streams over WebSocket: each carrier's messages (a pydantic model per message,
parsed as a discriminated union) read into the carrier-neutral events of ``base``, and the
messages omnivox sends (audio, playback markers, clear)."""

from omnivox.telephony.carriers.base import Carrier
from omnivox.telephony.carriers.plivo import PLIVO
from omnivox.telephony.carriers.telnyx import TELNYX
from omnivox.telephony.carriers.twilio import TWILIO

CARRIERS: dict[str, Carrier] = {c.name: c for c in (TWILIO, TELNYX, PLIVO)}

__all__ = ["CARRIERS", "Carrier"]
