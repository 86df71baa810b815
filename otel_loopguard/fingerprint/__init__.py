"""Fingerprints: a policy applied to a call's payloads, RawCall -> ToolCall (pure).

Above the canonical form (canon/), the policy and progress: `fingerprinter` turns arguments and
results into keyed digests under a policy's rules, `call` adds the progress evidence.
"""

from .call import fingerprint_call
from .fingerprinter import Fingerprint, Fingerprinter

__all__ = ["Fingerprint", "Fingerprinter", "fingerprint_call"]
