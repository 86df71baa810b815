"""Give memory back to the operating system after a burst: the receiver's one place for tricks
with the allocators (docs/reliability.md, "Overload", has the figures).

What stays resident after a burst, once the receiver's own structures are back to their
bounded side tables, is memory the allocators keep for reuse:
- CPython's small-object allocator (pymalloc) returns a 1 MiB arena only when every object in
  it is gone. A burst spreads objects that outlive it (cache entries, side-table entries,
  asyncio and gRPC internals) over every arena it used, so nearly all of them stay, mostly
  empty (docs/performance.md, "Memory bound", has the measurement).
- glibc keeps freed chunks for reuse; `malloc_trim` hands back every whole free page, but a
  page with one live object in it stays. Under `PYTHONMALLOC=malloc` (every Python object
  from glibc) that page granularity, rather than pymalloc's arenas, is what lets memory go
  back after a burst.
So after a burst (`Trimmer`) the receiver empties its caches whose entries were made all
through it (the digest memo, the OTLP encoding caches: they refill within a few requests),
trims, and has the garbage collected at the next quiet moment (then trims again); it copies the keys of the one side table that keeps an entry
per run for good (where its numbering stopped) so they lie together, and trims again. Only
where the C library has malloc_trim (glibc) does the trim do anything; and there `serve`
started from the command line runs under `PYTHONMALLOC=malloc` unless PYTHONMALLOC is set
already (`serve_with_malloc`: the process replaces itself once, at start, keeping its id).
The price is CPU: pymalloc is faster at small objects.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
from typing import Callable, Optional

from ...fingerprint import Fingerprinter
from ...otlp import spans, wire

_log = logging.getLogger("otel_loopguard.receiver")

TRIM, SETTLED = "trim", "settled"


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


def serve_with_malloc(argv: Optional[list[str]] = None) -> None:
    """Re-execute this process (same id, arguments and environment) with PYTHONMALLOC=malloc,
    when it matters and is allowed: glibc (malloc_trim), Linux, a real interpreter, and
    PYTHONMALLOC not set (any value set, `pymalloc` included, is kept: the way to opt out).
    `argv`: the interpreter's arguments to run instead of the same ones (the same program by a
    shorter way: serve/command.py). Call it before anything else runs: threads and open files
    do not survive an exec."""
    if os.environ.get("PYTHONMALLOC") or not available() or not sys.platform.startswith("linux"):
        return
    if getattr(sys, "frozen", False) or not sys.executable or not hasattr(sys, "orig_argv"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    args = argv if argv is not None else sys.orig_argv[1:]
    os.execve(sys.executable, [sys.executable, *args], {**os.environ, "PYTHONMALLOC": "malloc"})


def release_free_memory() -> bool:
    """Return the heap's free pages to the OS; True when some were. Blocks for milliseconds on
    a large heap (ctypes releases the GIL: call it from a worker thread)."""
    return bool(_TRIM(0)) if _TRIM is not None else False


def copied(text: str) -> str:
    """An equal string in a new object. Made one after another right after a trim (which
    gathers the heap's free chunks), such copies lie side by side, so the pages the originals
    were scattered over can go back once they are dropped."""
    return text[:1] + text[1:] if len(text) > 1 else text


def forget_caches(fingerprinter: Fingerprinter) -> None:
    """Empty the caches a burst filled (on the event loop's thread: they are not locked). The
    full garbage collection that frees what they held in cycles comes at the next quiet
    moment (pauses.py: it stops every sender while it walks), followed by another trim."""
    fingerprinter.forget_memo()
    spans.forget_cached()
    wire.forget_cached()


class Trimmer:
    """When to give memory back, from the estimate at each tick: `TRIM` once it has come down
    by `step` bytes from its high point since the last time (after a burst, not at every tick),
    and `SETTLED` once, when after such a fall it stops falling (the burst is over)."""

    def __init__(self, step: int):
        self._step = step
        self._high = 0
        self._last = 0
        self._falling = False

    def due(self, estimate: int) -> Optional[str]:
        self._high = max(self._high, estimate)
        last, self._last = self._last, estimate
        if self._high - estimate >= self._step:
            self._high, self._falling = estimate, True
            return TRIM
        if self._falling and estimate >= last:
            self._high, self._falling = estimate, False
            return SETTLED
        return None
