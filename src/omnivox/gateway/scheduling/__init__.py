"""Scheduling: the worker pool (FIFO queue, cache-aware routing, the single dispatch point), worker
states, queue ETAs, admission of sessions, and the health checks that keep the pool's view current."""
