"""Benchmarks: each module exposes ``add_arguments(parser)`` and ``run(args) -> int``.

Nothing at runtime imports this package.
"""

BENCHES = ("pool", "kv", "voice")
