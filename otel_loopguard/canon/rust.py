"""The canonical form and keyed digest of text payloads through the Rust module, when
native.py has chosen it: each function answers exactly as canonical.py and keys.py would, or
declines (None) so that they answer. The Python path stays the reference; tests/native/ holds
both to the same bytes, flags and digests. It answers only for text (a str without lone
surrogates, or UTF-8 bytes).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional

from ..native import max_int_digits, module
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

_module = module()
AVAILABLE: bool = _module is not None

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
