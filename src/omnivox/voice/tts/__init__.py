"""Streaming speech synthesis: the interface (base), text cleaning (clean) and backends."""
