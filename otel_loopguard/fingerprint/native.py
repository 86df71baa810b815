"""The one place that chooses between the Rust module and the Python path for the canonical
form and keyed digest of text payloads (docs/fingerprints.md, "The native module").

The Python path (canonical.py, keys.py) is the reference and stays complete on its own: the
Rust module `otel_loopguard_native` (native/, built by scripts/native.sh when cargo is
present) is used when importable, unless OTEL_LOOPGUARD_PURE_PYTHON is set to anything but
"" or "0". It answers only for text (a str without lone surrogates, or UTF-8 bytes); every
other value, and every call while it is absent, takes the Python path. tests/native/ holds
both to the same bytes, flags and digests.
"""

from __future__ import annotations

import logging
import os
import sys
from functools import lru_cache
from typing import Any, Optional

from .canonical import (
    DOUBLE_ENCODED,
    DUPLICATE_KEYS,
    NO_FLAGS,
    NON_FINITE,
    OPAQUE_TEXT,
    PROSE,
    TOO_DEEP,
    TOO_LARGE,
)

log = logging.getLogger(__name__)

PURE_ENV = "OTEL_LOOPGUARD_PURE_PYTHON"
_ABI = 2  # the signatures this module calls: otel_loopguard_native.ABI must match


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
    """The Rust module when in use, else None: for the module's other users (the receiver's
    decode, receiver/decode_native.py), so this stays the one place that chooses."""
    return _module

_NAMES = ((1, OPAQUE_TEXT), (2, DOUBLE_ENCODED), (4, DUPLICATE_KEYS), (8, NON_FINITE), (16, TOO_DEEP),
          (32, TOO_LARGE))
_PROSE_BIT = 64


@lru_cache(maxsize=None)  # at most 128 combinations of seven bits
def flags_of(bits: int) -> frozenset[str]:
    """The flag set for the Rust module's bits; prose is canonical.PROSE itself (the memo
    tells it apart by identity)."""
    if bits == 0:
        return NO_FLAGS
    if bits == 1 | _PROSE_BIT:
        return PROSE
    return frozenset(name for bit, name in _NAMES if bits & bit)


@lru_cache(maxsize=64)  # a policy has a handful of drop sets
def drops(keys: frozenset[str]) -> Any:
    """The Rust module's handle for a set of keys to drop (None: a key it cannot take)."""
    if _module is None or any(_has_surrogate(k) for k in keys):
        return None
    return _module.Drops(sorted(keys))


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def max_int_digits() -> int:
    """Python's limit on integer digits in int() (0: none), read per call: it can change."""
    get = getattr(sys, "get_int_max_str_digits", None)
    return get() if get is not None else 0


def canonical(value: Any, drop_keys: frozenset[str], max_bytes: int, max_depth: int
              ) -> Optional[tuple[str, bytes, frozenset[str]]]:
    """(form, canonical text as UTF-8 with surrogatepass, flags) of text, as
    canonical.parse then serialise give it; None when the Python path must answer."""
    handle = drops(drop_keys) if _module is not None else None
    if handle is None:
        return None
    got = _module.canonical(value, handle, max_bytes, max_depth, max_int_digits())
    if got is None:
        return None
    is_json, text, bits = got
    return ("json" if is_json else "text"), text, flags_of(bits)


def key(secret: bytes) -> Any:
    """The Rust module's key for `secret` (keys.DigestKey keeps it), or None without it."""
    return None if _module is None else _module.Key(secret)


def digest_text(prefix: Any, value: Any, identity: str, drop_keys: frozenset[str], max_bytes: int,
                max_depth: int) -> Optional[tuple[str, frozenset[str]]]:
    """(digest, flags) of text under `prefix` (keys.DigestKey.native_prefixed): the message
    fingerprinter._digest frames, with the canonical form computed natively; None when the
    Python path must answer."""
    handle = drops(drop_keys)
    if handle is None:
        return None
    ident = identity.encode("utf-8", "surrogatepass")
    got = prefix.digest_text(value, ident, handle, max_bytes, max_depth, max_int_digits())
    return None if got is None else (got[0], flags_of(got[1]))


def digest_form(prefix: Any, form: str, text: bytes) -> str:
    """The digest of canonical text already in UTF-8, with no identity, under `prefix`."""
    return prefix.digest_form(b"", form == "json", text)
