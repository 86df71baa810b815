"""The policy an application judges by, replaced without a restart (docs/policy.md, "Reloading").

The processor and each guard hold a PolicySource. Sources that read the same file share one
`_PolicyFile`: the process holds one policy per file, and a change replaces it for all of them
at once, so a guard and the processor never judge new runs by different rules. A new policy
is taken when `otel_loopguard.reload_policy()` is called (an admin endpoint, a SIGHUP handler
the application owns), or when the file changes: its stamp (watched.py) is looked at, at most
every `policy_reload_seconds` of the source that asks, when a run opens, never on a call's
path. It is loaded and checked in full first; one that fails keeps the policy in use
everywhere and says why (in the log, once per change of the file; `reload_policy()` raises).

A version names one set of rules: a file whose rules changed under a version this process
already used for other rules is refused (a file without `version:` gets a content hash).

A new policy judges the runs opened after it; an open run keeps the fingerprinter it
started with, so no run is judged half by one policy and half by another, and the
`loopguard.policy.version` of each finding names the policy that judged it (the receiver
does the same, receiver/serve/reload.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Callable, Optional

from .canon import DigestKey
from .errors import LoopguardError, PolicyError
from .fingerprint import Fingerprinter
from .policy import Policy, check_replacement, load_policy
from .watched import Stamp, file_stamp

RELOAD_SECONDS = 2.0
MAX_VERSIONS = 256  # versions remembered per file, each with the rules it named

_log = logging.getLogger("otel_loopguard")
_sources: "weakref.WeakSet[PolicySource]" = weakref.WeakSet()
_files: "weakref.WeakValueDictionary[str, _PolicyFile]" = weakref.WeakValueDictionary()
_sources_lock = threading.Lock()  # the two registries; also makes reload_policy() one at a time


class _PolicyFile:
    """The one policy of the process for one file, and the versions it has used."""

    def __init__(self, path: str):
        self.path = path
        self.stamp: Stamp = file_stamp(path)
        self.policy: Policy = load_policy(path)
        self.versions: dict[str, Policy] = {self.policy.version: self.policy}
        self.lock = threading.Lock()  # one look or reload at a time; readers never wait for it

    def candidate(self) -> Optional[Policy]:
        """The file's policy if it should replace the one in use, None when the rules are the
        same; a LoopguardError (nothing changed) when it is invalid or reuses a version."""
        new = load_policy(self.path)
        if not check_replacement(self.policy, new, self.path):
            return None
        used = self.versions.get(new.version)
        if used is not None and used != new:
            raise PolicyError(f"{self.path}: version {new.version} already named other rules in this process; "
                              "give the changed rules a new version (or remove `version:` to use a content hash)")
        return new

    def take(self, new: Policy) -> None:
        old, self.policy = self.policy, new
        if len(self.versions) >= MAX_VERSIONS:
            self.versions.pop(next(iter(self.versions)))
        self.versions[new.version] = new
        _log.warning("otel-loopguard: policy %s replaces %s (%s): runs opened from now on are judged by it, "
                     "open runs keep %s", new.version, old.version, self.path, old.version)

    def look(self, wait: bool = False) -> None:
        """The timer's look: take a changed file, or log once per change why it is refused."""
        if not self.lock.acquire(blocking=wait):
            return  # another thread is looking: its answer is as fresh as ours would be
        try:
            stamp = file_stamp(self.path)
            if stamp == self.stamp or stamp is None:  # unchanged, or mid-swap: look again later
                return
            self.stamp = stamp
            try:
                new = self.candidate()
            except LoopguardError as exc:  # messages name the file and the setting, never the key
                _log.error("otel-loopguard: keeping policy %s everywhere in this process: %s", self.policy.version, exc)
                return
            if new is not None:
                self.take(new)
        finally:
            self.lock.release()


def _shared(path: str) -> _PolicyFile:
    """The file's shared state, made on first use (an invalid file is an error then). A source
    made later looks at the file at once, as the timer does: a changed file is taken for every
    source, a refused one is logged and the policy in use stays, for this source too."""
    key = os.path.abspath(path)
    with _sources_lock:
        shared = _files.get(key)
        if shared is None:
            shared = _files[key] = _PolicyFile(path)
            return shared
    shared.look(wait=True)
    return shared


class PolicySource:
    def __init__(self, key: DigestKey, path: Optional[str], interval: float = RELOAD_SECONDS,
                 clock: Callable[[], float] = time.monotonic, *, policy: Optional[Fingerprinter] = None):
        self._key = key
        self._path = path
        self._reloadable = policy is None  # a policy handed over in code has no file to read again
        self._file = _shared(path) if self._reloadable and path is not None else None
        self._fp = policy or Fingerprinter(key, self._file.policy if self._file is not None else load_policy(None))
        self._interval = interval
        self._clock = clock
        self._watch = self._file is not None and interval > 0
        self._next_look = clock() + interval
        if self._reloadable:
            with _sources_lock:
                _sources.add(self)

    @classmethod
    def of(cls, fp: Fingerprinter) -> "PolicySource":
        """A fixed source: the policy given in code (tests, embedding), never reloaded."""
        return cls(fp.key, None, 0, policy=fp)

    @property
    def fingerprinter(self) -> Fingerprinter:
        """The fingerprinter for the policy in use now, without looking at the file."""
        shared = self._file
        if shared is not None and self._fp.policy is not shared.policy:
            self._fp = Fingerprinter(self._key, shared.policy)  # another source took a new one
        return self._fp

    def for_new_run(self) -> Fingerprinter:
        """The fingerprinter a run opening now is judged by: the file is looked at first when
        `interval` has passed since this source last looked."""
        if self._watch and self._clock() >= self._next_look:
            self._next_look = self._clock() + self._interval
            assert self._file is not None
            self._file.look()
        return self.fingerprinter

    def reload(self) -> bool:
        """Load the file again now: True when a new policy replaced the one in use, False when
        the rules are unchanged; a LoopguardError (the policy in use stays) when it is invalid."""
        if self._file is None:
            return False
        return _reload([self._file])


def _reload(files: list[_PolicyFile]) -> bool:
    """Every file checked first, then every change taken: one refused file changes nothing. A
    file that is not there (a ConfigMap swapping its symlink, a file removed) is no change."""
    for f in files:
        f.lock.acquire()
    try:
        present = [(f, stamp) for f in files if (stamp := file_stamp(f.path)) is not None]
        candidates: list[Optional[Policy]] = []
        refused: list[str] = []
        for f, _ in present:
            try:
                candidates.append(f.candidate())
            except LoopguardError as exc:  # every file is checked: the error names each refused one
                refused.append(str(exc))
        if refused:
            raise PolicyError("; ".join(refused))
        for (f, stamp), new in zip(present, candidates):
            f.stamp = stamp
            if new is not None:
                f.take(new)
        return any(new is not None for new in candidates)
    finally:
        for f in files:
            f.lock.release()


def reload_all() -> list[str]:
    """Reload every policy file of this process (the processor's and each guard's) as one
    change; the versions in use afterwards. A file that fails keeps every policy in use."""
    with _sources_lock:
        sources = list(_sources)
        files = sorted({id(s._file): s._file for s in sources if s._file is not None}.values(), key=lambda f: f.path)
    try:
        _reload(files)
    except LoopguardError as exc:
        raise PolicyError(f"reload_policy(): the policy in use is kept everywhere in this process: {exc}") from None
    return sorted({s.fingerprinter.policy.version for s in sources})
