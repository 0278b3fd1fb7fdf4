"""Tests use the same process launcher as the benchmarks."""

from omnivox.bench.cluster import Cluster, cluster, free_port

__all__ = ["Cluster", "cluster", "free_port"]
