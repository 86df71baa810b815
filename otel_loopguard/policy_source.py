"""The policy an application judges by, replaced without a restart (docs/policy.md, "Reloading").

The processor and each guard hold a PolicySource. A new policy is taken when
`otel_loopguard.reload_policy()` is called (an admin endpoint, a SIGHUP handler the
application owns), or when the policy file changes: its stamp (watched.py) is looked at, at
most every `policy_reload_seconds`, when a run opens, never on a call's path. It is loaded
and checked in full first; one that fails keeps the policy in use and says why in the log,
once per change of the file.

A new policy judges the runs opened after it; an open run keeps the fingerprinter it
started with, so no run is judged half by one policy and half by another, and the
`loopguard.policy.version` of each finding names the policy that judged it (the receiver
does the same, receiver/reload.py).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Callable, Optional

from .canon import DigestKey
from .errors import LoopguardError, PolicyError
from .fingerprint import Fingerprinter
from .policy import check_replacement, load_policy
from .watched import file_stamp

RELOAD_SECONDS = 2.0

_log = logging.getLogger("otel_loopguard")
_sources: "weakref.WeakSet[PolicySource]" = weakref.WeakSet()
_sources_lock = threading.Lock()


class PolicySource:
    def __init__(self, key: DigestKey, path: Optional[str], interval: float = RELOAD_SECONDS,
                 clock: Callable[[], float] = time.monotonic, *, policy: Optional[Fingerprinter] = None):
        self._key = key
        self._path = path
        self._fp = policy or Fingerprinter(key, load_policy(path))
        self._interval = interval
        self._clock = clock
        self._reloadable = policy is None  # a policy handed over in code has no file to read again
        self._watch = self._reloadable and path is not None and interval > 0
        self._stamp = file_stamp(path) if path is not None else None
        self._next_look = clock() + interval
        self._lock = threading.Lock()  # one reload at a time; readers never wait for it
        if self._reloadable:
            with _sources_lock:
                _sources.add(self)

    @classmethod
    def of(cls, fp: Fingerprinter) -> "PolicySource":
        """A fixed source: the policy given in code (tests, embedding), never reloaded."""
        return cls(fp.key, None, 0, policy=fp)

    @property
    def fingerprinter(self) -> Fingerprinter:
        """The fingerprinter in use, without looking at the file (calls of an open run)."""
        return self._fp

    def for_new_run(self) -> Fingerprinter:
        """The fingerprinter a run opening now is judged by: the file is looked at first when
        `interval` has passed since the last look."""
        if self._watch and self._clock() >= self._next_look:
            self._look()
        return self._fp

    def reload(self) -> bool:
        """Load the file again now: True when a new policy replaced the one in use, False when
        the rules are unchanged; a LoopguardError (the old policy stays) when it is invalid."""
        if not self._reloadable:
            return False
        with self._lock:
            if self._path is not None:
                self._stamp = file_stamp(self._path)
            return self._replace()

    def _look(self) -> None:
        if not self._lock.acquire(blocking=False):
            return  # another thread is looking: its answer is as fresh as ours would be
        try:
            self._next_look = self._clock() + self._interval
            assert self._path is not None
            stamp = file_stamp(self._path)
            if stamp == self._stamp or stamp is None:  # unchanged, or mid-swap: look again later
                return
            self._stamp = stamp
            try:
                self._replace()
            except LoopguardError as exc:  # messages name the file and the setting, never the key
                _log.error("otel-loopguard: keeping policy %s: %s", self._fp.policy.version, exc)
        finally:
            self._lock.release()

    def _replace(self) -> bool:
        new, old = load_policy(self._path), self._fp.policy
        if not check_replacement(old, new, self._path or "the built-in policy"):
            return False
        self._fp = Fingerprinter(self._key, new)
        _log.warning("otel-loopguard: policy %s replaces %s: runs opened from now on are judged by it, "
                     "open runs keep %s", new.version, old.version, old.version)
        return True


def reload_all() -> list[str]:
    """Reload every policy source of this process (the processor's and each guard's); the
    versions in use afterwards. Every source is tried; the first failure is raised after."""
    with _sources_lock:
        sources = list(_sources)
    failure: Optional[LoopguardError] = None
    for source in sources:
        try:
            source.reload()
        except LoopguardError as exc:
            failure = failure or exc
    if failure is not None:
        raise PolicyError(f"reload_policy(): the policy in use is kept: {failure}") from None
    return sorted({s.fingerprinter.policy.version for s in sources})
