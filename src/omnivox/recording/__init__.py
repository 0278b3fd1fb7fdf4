"""Session recording: a tap on the relay (``service``), the files it writes (``store``), the merged
replay (``replay``), and retention (``cleanup``). Which frames carry what is each protocol's own
knowledge (``protocol.timelines.reader``); nothing here names a protocol."""
