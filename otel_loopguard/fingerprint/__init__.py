"""Fingerprints: canonical form, keyed digests, and RawCall -> ToolCall (pure)."""

from .call import fingerprint_call, fingerprint_finished
from .canonical import Canonical, canonicalize
from .fingerprinter import Fingerprint, Fingerprinter
from .keys import DigestKey, ephemeral_key, load_key

__all__ = [
    "Canonical",
    "DigestKey",
    "Fingerprint",
    "Fingerprinter",
    "canonicalize",
    "ephemeral_key",
    "fingerprint_call",
    "fingerprint_finished",
    "load_key",
]
