"""The OpenAI Realtime API: client events and the protocol (wire), server events, session
configuration, WebRTC media."""
