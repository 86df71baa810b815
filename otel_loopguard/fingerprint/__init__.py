"""Fingerprints: canonical form, keyed digests, and RawCall -> ToolCall (pure).

`canonical` and `keys` sit below `policy` (policy/load.py hashes a policy's canonical
content), `fingerprinter` and `call` above it (they apply a policy). So the package loads
only the lower two with itself and each name of the upper two on its first use: importing
`otel_loopguard.fingerprint.canonical` never imports the policy (tests/test_layering.py).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .canonical import Canonical, canonicalize
from .keys import DigestKey, ephemeral_key, load_key

if TYPE_CHECKING:
    from .call import fingerprint_call, fingerprint_finished
    from .fingerprinter import Fingerprint, Fingerprinter

_ABOVE_POLICY = {"Fingerprint": "fingerprinter", "Fingerprinter": "fingerprinter", "fingerprint_call": "call",
                 "fingerprint_finished": "call"}


def __getattr__(name: str) -> Any:
    """A name of the modules above the policy, imported on first use (PEP 562)."""
    module = _ABOVE_POLICY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next lookup finds it without this function
    return value


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
