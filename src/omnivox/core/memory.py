"""Memory given back: large buffers are returned to the system when freed, not kept by the allocator.

glibc serves an allocation over its mmap threshold (128 KiB) with a mapping of its own and unmaps
it when it is freed, but it raises that threshold to the size of each such block freed (up to 32
MiB). A server that receives megabyte frames (a client flooding its queue, audio, images) so soon
takes them from the heap instead, where freed blocks stay: the gateway kept 60 MB after each round
of 40 queued clients sending 4 MB and leaving, and the audit saw it climb round after round.
Setting the threshold fixes it (the dynamic raise is off): the same rounds left the gateway within
5 MB of where it started (docs/benchmarks.md). Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 128 * 1024


def return_large_frees() -> bool:
    """Fix glibc's mmap threshold for this process; False where there is no glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to set
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
