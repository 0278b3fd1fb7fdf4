"""glibc's mmap threshold is fixed for servers (large frees go back to the system)."""

from __future__ import annotations

import ctypes.util
import platform

from omnivox.core.memory import return_large_frees


def test_the_threshold_is_set_where_glibc_is() -> None:
    glibc = platform.libc_ver()[0] == "glibc" and ctypes.util.find_library("c") is not None
    assert return_large_frees() is glibc
