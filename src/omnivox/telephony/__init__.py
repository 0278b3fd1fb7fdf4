"""Phone calls: SIP signalling (through aiosipua), RTP and RFC 4733 DTMF, SDP offer/answer for
G.711, digest authentication, Standard Webhooks signatures, and the carriers' media-stream
messages (Twilio, Telnyx, Plivo).

Nothing here knows a model, a worker or the gateway: the gateway's telephony edge
(``omnivox.gateway.telephony``) carries a call into a realtime session like any other client.
"""
