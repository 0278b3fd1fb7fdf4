"""Streaming speech recognition: the interface (base) and its backends."""
