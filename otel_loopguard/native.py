"""The one place that chooses between the Rust module `otel_loopguard_native` and the Python
path (docs/fingerprints.md, "The native module"), a leaf that its users ask: the canonical form
(canon/rust.py) and the receiver's decode.

The Python path is the reference and stays complete on its own: the Rust module (native/, built
by scripts/native.sh when cargo is present) is used when importable, unless
OTEL_LOOPGUARD_PURE_PYTHON is set to anything but "" or "0"; tests/native/ holds both to the
same bytes, flags, digests and records.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

log = logging.getLogger(__name__)

PURE_ENV = "OTEL_LOOPGUARD_PURE_PYTHON"
_ABI = 3  # the signatures this module calls: otel_loopguard_native.ABI must match


def _load() -> Any:
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None
    try:
        import otel_loopguard_native as module
    except ImportError:
        return None
    if getattr(module, "ABI", None) != _ABI:
        log.warning("otel_loopguard_native has ABI %r, not %r: using the Python path (rebuild it: "
                    "bash scripts/native.sh)", getattr(module, "ABI", None), _ABI)
        return None
    return module


_module = _load()
AVAILABLE: bool = _module is not None
PATH: str = "native" if AVAILABLE else "python"


def module() -> Any:
    """The Rust module when in use, else None: for the module's other users (canon/rust.py, the
    receiver's decode), so this stays the one place that chooses."""
    return _module


def max_int_digits() -> int:
    """Python's limit on integer digits in int() (0: none), read per call: it can change."""
    get = getattr(sys, "get_int_max_str_digits", None)
    return get() if get is not None else 0
