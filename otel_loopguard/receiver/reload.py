"""Change the policy, the certificates and the tokens of a running receiver (SIGHUP).

Each is loaded and checked in full before it replaces the one in use; one that fails keeps
the running one, logs why (never a token or a key) and counts `reload_failures_total`.
The policy file is also watched: its modification time, size and inode are looked at every
`policy_poll_seconds` (a ConfigMap update swaps a symlink, which changes the inode).

A new policy judges the runs opened after it; a run already open keeps the policy it
started with to its end, so no run is judged half by one policy and half by another, and
the `loopguard.policy.version` of each finding names the policy that judged it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Callable, Optional

from ..errors import LoopguardError
from ..fingerprint import DigestKey, Fingerprinter
from ..policy import Policy, load_policy
from .assembly import RunAssembler
from .config import ReceiverConfig
from .metrics import Metrics
from .security import CertificateStore, Tokens, load_certificates, load_tokens

_log = logging.getLogger("otel_loopguard.receiver")
Stamp = Optional[tuple[int, int, int]]
Step = Callable[[], bool]
_WHAT = {"policy": "running policy", "tls": "TLS certificates", "tokens": "bearer tokens"}


class Reloader:
    def __init__(self, config: ReceiverConfig, key: DigestKey, assembler: RunAssembler, metrics: Metrics,
                 certificates: Optional[CertificateStore], tokens: Optional[Tokens]):
        self._config = config
        self._key = key
        self._assembler = assembler
        self._metrics = metrics
        self._certificates = certificates
        self._tokens = tokens
        self._stamp = _stamp(config.policy)

    @property
    def policy(self) -> Policy:
        return self._assembler.fingerprinter.policy

    def reload(self) -> None:
        """SIGHUP: everything that comes from a file, each on its own."""
        what = [name for name, on in (("policy", self._config.policy), ("certificates", self._certificates),
                                      ("tokens", self._tokens)) if on]
        _log.info("reloading (SIGHUP): %s", ", ".join(what) or "nothing comes from a file")
        if self._config.policy:
            self._stamp = _stamp(self._config.policy)
            self.reload_policy()
        if self._certificates is not None:
            self._reload("tls", self._new_certificates)
        if self._tokens is not None:
            self._reload("tokens", self._new_tokens)

    def reload_policy(self) -> bool:
        """Load, check, and only then swap in the policy file; True when it changed."""
        return self._reload("policy", self._new_policy)

    def _reload(self, what: str, step: Step) -> bool:
        try:
            return step()
        except LoopguardError as exc:  # messages name the setting and the file, never a secret
            reason = str(exc)
        except Exception as exc:  # a reload must never stop the receiver
            reason = f"unexpected {type(exc).__name__}"
            _log.debug("reload of %s failed", what, exc_info=True)
        self._metrics.inc("reload_failures_total", setting=what)
        _log.error("reload: keeping the %s in use: %s", _WHAT[what], reason)
        return False

    def _new_policy(self) -> bool:
        assert self._config.policy
        new, old = load_policy(self._config.policy), self.policy
        if new == old:
            _log.info("reload: policy %s unchanged", old.version)
            return False
        if new.version == old.version:
            # Findings would name one version for two sets of rules.
            raise LoopguardError(f"{self._config.policy}: its rules changed but its version ({old.version}) did not; "
                                 "give it a new version (or remove `version:` to use a content hash)")
        self._assembler.use(Fingerprinter(self._key, new))
        _log.info("policy %s replaces %s: runs opened from now on are judged by it, open runs keep %s",
                  new.version, old.version, old.version)
        return True

    def _new_certificates(self) -> bool:
        assert self._certificates is not None
        new = load_certificates(self._config)
        assert new is not None
        self._certificates.replace(new)
        _log.info("reload: TLS certificates replaced (new connections use them)")
        return True

    def _new_tokens(self) -> bool:
        assert self._tokens is not None
        new = load_tokens(self._config)
        if not new:
            raise LoopguardError("auth_token_file / auth_tokens: no token left; auth cannot be turned off by a reload")
        self._tokens.replace(new)
        _log.info("reload: %d bearer token(s) accepted", len(new))  # a count, never a token
        return True

    async def watch_policy(self, interval: float) -> None:
        """Reload the policy when its file changes (a bad version is reported once per change)."""
        assert self._config.policy
        while True:
            await asyncio.sleep(interval)
            stamp = _stamp(self._config.policy)
            if stamp != self._stamp:
                self._stamp = stamp
                self.reload_policy()


def _stamp(path: Optional[str]) -> Stamp:
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino
