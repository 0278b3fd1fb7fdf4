"""Past one gateway: the scheduler store and everything else a client may meet on any gateway
(ephemeral keys, per-client limits, the WebRTC call map, the media-token secret) on Redis, shared by
several gateways. Imported only when a ``redis://`` store is configured (``omnivox[redis]``)."""
