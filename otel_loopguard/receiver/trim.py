"""Give freed heap memory back to the operating system after a burst (glibc's malloc_trim).

CPython hands its small-object arenas back when they empty, but much of what a burst leaves
behind is glibc heap (request buffers, the dicts and deques resized for the dedupe table,
protobuf's arenas). glibc keeps freed chunks below the top of its heap for reuse, so resident
memory stays at the burst's peak long after the receiver's own estimate came down. Measured in
the overload scenario of bench/chaos.py (docs/reliability.md): the figures with and without.

Only where the C library has malloc_trim (glibc); elsewhere a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from typing import Callable, Optional

_log = logging.getLogger("otel_loopguard.receiver")


def _malloc_trim() -> Optional[Callable[[int], int]]:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def available() -> bool:
    return _TRIM is not None


def release_free_memory() -> bool:
    """Return the heap's free pages to the OS; True when some were. Blocks for milliseconds on
    a large heap (ctypes releases the GIL: call it from a worker thread)."""
    return bool(_TRIM(0)) if _TRIM is not None else False


class Trimmer:
    """Trim once the memory estimate has come down by `step` bytes from its high point since the
    last trim: after a burst, not at every tick."""

    def __init__(self, step: int):
        self._step = step
        self._high = 0

    def due(self, estimate: int) -> bool:
        self._high = max(self._high, estimate)
        if self._high - estimate < self._step:
            return False
        self._high = estimate
        return available()
