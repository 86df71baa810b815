"""The secret digest key: loading, a non-secret key id, and the HMAC itself.

The key is read from configuration only. It is never logged, never put in an
error message and never written anywhere; `repr()` of a key shows its id.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
import secrets
from pathlib import Path
from typing import Any, Mapping, NoReturn, Optional

from ..errors import KeyConfigError
from . import rust as native

_log = logging.getLogger(__name__)

ENV_KEY = "OTEL_LOOPGUARD_KEY"
ENV_KEY_FILE = "OTEL_LOOPGUARD_KEY_FILE"
ENV_KEY_ID = "OTEL_LOOPGUARD_KEY_ID"
MIN_KEY_BYTES = 16
DIGEST_BYTES = 16  # 128 bits -> 32 hex chars
_BLOCK = 64  # SHA-256 block size, for HMAC's key padding

_warned_ephemeral = False


class DigestKey:
    """An HMAC-SHA256 key plus its public id. Digests under other ids never compare."""

    __slots__ = ("_secret", "key_id", "ephemeral", "_inner", "_outer", "_native")

    def __init__(self, secret: bytes, key_id: Optional[str] = None, *, ephemeral: bool = False):
        if len(secret) < MIN_KEY_BYTES:
            raise KeyConfigError(
                f"digest key is too short: {len(secret)} bytes, need at least {MIN_KEY_BYTES}"
            )
        self._secret = bytes(secret)
        self.key_id = key_id or _derived_id(self._secret)
        self.ephemeral = ephemeral
        # HMAC-SHA256 (RFC 2104) with the padded key already hashed in: each digest
        # then copies two prepared states instead of setting the key up again (half
        # the cost of hmac.digest for the short messages digested here).
        padded = (hashlib.sha256(self._secret).digest() if len(self._secret) > _BLOCK else self._secret).ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in padded))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in padded))
        self._native: Any = False  # the Rust module's key, made on first use (None: absent)

    def digest(self, message: bytes) -> str:
        """Truncated keyed digest: 32 lowercase hex chars (= hmac.digest(secret, message, "sha256"))."""
        return self.digest_after(self._inner, message)

    def prefixed(self, prefix: bytes) -> Any:
        """A prepared state for messages that start with `prefix`: hash it once, not per message."""
        state = self._inner.copy()
        state.update(prefix)
        return state

    def digest_after(self, prefixed: Any, rest: bytes) -> str:
        """digest(prefix + rest), `prefixed` coming from `prefixed(prefix)` of this key."""
        inner = prefixed.copy()
        inner.update(rest)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()[:DIGEST_BYTES].hex()

    def native_prefixed(self, prefix: bytes) -> Any:
        """The Rust module's state after `prefix` (see `prefixed`), or None without the module
        (canon/rust.py). Its digests equal `digest_after`'s (tests/native/)."""
        if self._native is False:
            self._native = native.key(self._secret)
        return None if self._native is None else self._native.prefixed(prefix)

    def __repr__(self) -> str:
        return f"DigestKey(key_id={self.key_id!r}, ephemeral={self.ephemeral})"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:  # pickling would copy the secret somewhere
        raise TypeError("DigestKey cannot be pickled")


def _derived_id(secret: bytes) -> str:
    # A one-way function of the key: stable across processes, reveals nothing.
    tag = hmac.digest(secret, b"otel-loopguard key id v1", "sha256")[:6].hex()
    return f"hmac-{tag}"


def decode_key_text(text: str, source: str) -> bytes:
    """`hex:...`, `base64:...`, or the UTF-8 bytes of the text itself."""
    text = text.strip()
    try:
        if text.startswith("hex:"):
            return bytes.fromhex(text[4:])
        if text.startswith("base64:"):
            return base64.b64decode(text[7:], validate=True)
    except (ValueError, binascii.Error):
        raise KeyConfigError(f"{source}: the key is not valid {text.split(':', 1)[0]}") from None
    return text.encode("utf-8")


def load_key(
    env: Optional[Mapping[str, str]] = None,
    *,
    key: Optional[bytes | str] = None,
    key_file: Optional[str | os.PathLike[str]] = None,
    key_id: Optional[str] = None,
) -> DigestKey:
    """Key from arguments, else OTEL_LOOPGUARD_KEY / _KEY_FILE, else an ephemeral one."""
    env = os.environ if env is None else env
    key_id = key_id or env.get(ENV_KEY_ID) or None
    if key is None and key_file is None:
        key = env.get(ENV_KEY) or None
        key_file = env.get(ENV_KEY_FILE) or None
    if key is not None:
        secret = key if isinstance(key, bytes) else decode_key_text(key, ENV_KEY)
        return DigestKey(secret, key_id)
    if key_file is not None:
        return DigestKey(_read_key_file(Path(key_file)), key_id)
    return ephemeral_key()


def _read_key_file(path: Path) -> bytes:
    try:
        found = path.exists()
    except (OSError, ValueError):  # a name too long for a path, or with a NUL: a pasted key, likely
        found = False
    if not found:
        # Not echoed (nor the OS's error, which names the path): a key pasted into the
        # path setting by mistake must not leak.
        raise KeyConfigError(f"no key file at the path given by {ENV_KEY_FILE} / --key-file (not shown: "
                             "it may be the key itself)")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KeyConfigError(f"cannot read key file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise KeyConfigError(f"key file {path} is not UTF-8 text (use hex: or base64:)") from None
    return decode_key_text(text, str(path))


def ephemeral_key() -> DigestKey:
    """A random per-process key. Warns once: digests then compare only in this process."""
    global _warned_ephemeral
    if not _warned_ephemeral:
        _warned_ephemeral = True
        _log.warning(
            "no digest key configured (%s or %s): using a random per-process key; "
            "digests compare only within this process",
            ENV_KEY,
            ENV_KEY_FILE,
        )
    suffix = hashlib.sha256(secrets.token_bytes(16)).hexdigest()[:8]
    return DigestKey(secrets.token_bytes(32), f"ephemeral-{suffix}", ephemeral=True)
