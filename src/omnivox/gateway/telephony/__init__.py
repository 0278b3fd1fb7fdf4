"""The gateway's phone edge: SIP calls and carrier media streams, each a ``PhoneCall`` (a
``Socket``) served by the one client edge like any other session."""
