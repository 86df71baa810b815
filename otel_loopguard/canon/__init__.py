"""The canonical form and its keyed digests: the lowest stage of the pipeline, below the policy.

- `canonical`: the rules (docs/fingerprints.md): what two payloads must share to be the same;
- `volatile`: values shaped like generated ids or clock readings, masked in results;
- `keys`: the digest key (HMAC-SHA256), loaded, rotated, never written anywhere;
- `fast`: the stage's one shortcuts module (orjson), proven equal to the rules;
- `rust`: the same rules through the Rust module, when native.py has chosen it.

Nothing here knows a policy: policy/ hashes its own canonical content with these.
"""

from .canonical import Canonical, canonicalize
from .keys import DigestKey, ephemeral_key, load_key

__all__ = ["Canonical", "DigestKey", "canonicalize", "ephemeral_key", "load_key"]
