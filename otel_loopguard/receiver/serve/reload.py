"""Change the policy, the certificates and the tokens of a running receiver, without a restart.

Reloaded on SIGHUP, and when their files change: every `reload_poll_seconds` the stamp of
each file is looked at (watched.py). Each part is loaded and checked in full before it
replaces the one in use; one that fails keeps the running one, logs why (never a token or a
key) and counts `reload_failures_total`. A certificate and its key written one after the
other may be seen half-written (a key that does not match yet): refused, then taken at the
next look, once both are there.

A new policy judges the runs opened after it; a run already open keeps the policy it
started with to its end, so no run is judged half by one policy and half by another, and
the `loopguard.policy.version` of each finding names the policy that judged it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Optional

from ...canon import DigestKey
from ...errors import LoopguardError
from ...fingerprint import Fingerprinter
from ...policy import Policy, check_replacement, load_policy
from ..runs.assembly import RunAssembler
from ..config import ReceiverConfig
from ..ops.metrics import Metrics
from ...watched import Stamp as FileStamp, file_stamp
from ..ops.security import CertificateStore, Tokens, load_certificates, load_tokens

_log = logging.getLogger("otel_loopguard.receiver")
Stamp = tuple[FileStamp, ...]
_WHAT = {"policy": "running policy", "tls": "TLS certificates", "tokens": "bearer tokens"}


class Reloader:
    def __init__(self, *, config: ReceiverConfig, key: DigestKey, assembler: RunAssembler, metrics: Metrics,
                 certificates: Optional[CertificateStore], tokens: Optional[Tokens]):
        self._config = config
        self._key = key
        self._assembler = assembler
        self._metrics = metrics
        self._certificates = certificates
        self._tokens = tokens
        # Each reloadable part: its files, and the step that loads, checks and swaps it in.
        parts: dict[str, tuple[tuple[str, ...], Callable[[], bool]]] = {}
        if config.policy:
            parts["policy"] = ((config.policy,), self._new_policy)
        if certificates is not None:
            files = (config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file)
            parts["tls"] = (tuple(f for f in files if f), self._new_certificates)
        if tokens is not None and config.auth_token_file:
            parts["tokens"] = ((config.auth_token_file,), self._new_tokens)
        self._parts = parts
        self._stamps = {what: _stamp(files) for what, (files, _) in parts.items()}

    @property
    def policy(self) -> Policy:
        return self._assembler.fingerprinter.policy

    @property
    def watching(self) -> bool:
        return bool(self._parts)

    def reload(self) -> None:
        """SIGHUP: every part that comes from a file, each on its own."""
        _log.info("reloading (SIGHUP): %s", ", ".join(self._parts) or "nothing comes from a file")
        for what, (files, step) in self._parts.items():
            self._stamps[what] = _stamp(files)
            self._reload(what, step)

    async def watch(self, interval: float) -> None:
        """Reload a part when one of its files changes (a bad version is reported once per change)."""
        while True:
            await asyncio.sleep(interval)
            for what, (files, step) in self._parts.items():
                stamp = _stamp(files)
                if stamp != self._stamps[what]:
                    self._stamps[what] = stamp
                    self._reload(what, step)

    def _reload(self, what: str, step: Callable[[], bool]) -> bool:
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
        if not check_replacement(old, new, self._config.policy):
            _log.info("reload: policy %s unchanged", old.version)
            return False
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


def _stamp(paths: tuple[str, ...]) -> Stamp:
    return tuple(file_stamp(p) for p in paths)
