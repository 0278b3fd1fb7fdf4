"""Tests start a real redis-server through the benchmarks' helper (one launcher for both)."""

from omnivox.testing.redis_server import RedisServer, free_port, redis_server

__all__ = ["RedisServer", "free_port", "redis_server"]
