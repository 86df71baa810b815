"""The receiver's state directory (`state_dir`): what a restart must not forget.

- `lock`: held (flock) while a receiver runs, with its pid and listen address written in it; a
  second receiver on the same directory stops at start with a clear error instead of
  interleaving its queue with the first one's, unless it listens on the same address: then it
  is the first one's successor and takes over (handover.py).
- `queue/`: the forward queue (spool.py); `findings/`: finding and run spans not yet delivered
  (the same format).
- `dedupe/0.log`, `dedupe/1.log`: the (trace id, span id) keys of every accepted request, with
  the wall-clock time they were accepted, so a sender's retry after a restart is recognised as
  a duplicate and not forwarded twice. Two generations: when the one being written holds
  `dedupe_size` keys the other is emptied and written next, so at least the last `dedupe_size`
  keys are always on disk. Keys older than `dedupe_seconds` are not loaded.
- `alive`: the wall-clock time (ns) this receiver was last seen working, rewritten at every
  tick and at shutdown. The next receiver reads it to know until when its predecessor may
  have taken spans (restart.py).

Span contents are not persisted for the dedupe (the in-memory content id is a per-process
hash): a restored key counts as a duplicate whatever the span under it holds.
"""

from __future__ import annotations

import logging
import os
import struct
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from ..config import ConfigError, ReceiverConfig
from ..ingest.dedupe import DUPLICATE, Content, Key, SpanDeduper
from .handover import write_owner
from .spool import Spool, write_all

_log = logging.getLogger("otel_loopguard.receiver")

KEY_BYTES = 24  # trace id (16) + span id (8)
_BATCH = struct.Struct("<IIq")  # key count, crc32 of the keys, accepted at (wall clock, ns)
_ALIVE = struct.Struct("<q")


class StateDirBusy(ConfigError):
    """Another live receiver holds the state directory."""


class StateDir:
    def __init__(self, path: str, fsync: bool = False, listen: str = ""):
        """Locked, or StateDirBusy; `listen`: this receiver's address, for a successor (handover.py)."""
        self.path = Path(path)
        self.fsync = fsync
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._lock = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise ConfigError(f"state_dir: cannot use {path}: {exc.strerror or exc}") from None
        try:
            _lock(self._lock)
        except BlockingIOError:
            os.close(self._lock)
            raise StateDirBusy(f"state_dir: {path} is in use by another otel-loopguard receiver "
                              "(each receiver needs its own state directory)") from None
        if listen:
            write_owner(self._lock, listen)
        self.previous_alive_ns = self._read_alive()
        self._alive = os.open(self.path / "alive", os.O_RDWR | os.O_CREAT, 0o600)
        self.beat()  # at once: a process killed before its first tick still leaves its time

    def spool(self) -> Spool:
        """The forward queue's: a record is done once delivered and judged (judged.py)."""
        return Spool(self.path / "queue", fsync=self.fsync, acks=2)

    def _read_alive(self) -> Optional[int]:
        try:
            data = (self.path / "alive").read_bytes()
        except FileNotFoundError:
            return None
        if len(data) != _ALIVE.size:
            _log.warning("state dir: %s is not a time stamp; the previous receiver's end is unknown",
                         self.path / "alive")
            return None
        return _ALIVE.unpack(data)[0]

    def beat(self) -> None:
        """This receiver still takes spans: an 8-byte write in place (no fsync)."""
        os.pwrite(self._alive, _ALIVE.pack(time.time_ns()), 0)

    def close(self) -> None:
        self.beat()
        os.close(self._alive)
        os.close(self._lock)  # releases the flock


def _lock(fd: int) -> None:
    """An exclusive lock the process holds until it exits (released by the kernel on a crash)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, one receiver per directory is then up to the operator
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


class DedupeLog:
    """Two generations of accepted keys on disk (see the module docstring)."""

    def __init__(self, directory: Path, *, size: int, ttl_seconds: float, fsync: bool = False):
        self._dir = directory
        self._size = size
        self._ttl_ns = int(ttl_seconds * 1e9)
        self._fsync = fsync
        self._dir.mkdir(parents=True, exist_ok=True)
        self._gen = 0
        self._count = 0
        self._fd = -1

    def load(self) -> dict[bytes, int]:
        """Keys accepted within the TTL -> when (wall ns); then the newer generation is written on."""
        now = time.time_ns()
        keys: dict[bytes, int] = {}
        counts, newest = [0, 0], [0, 0]
        for gen in (0, 1):
            for at, batch in self._read(gen):
                counts[gen] += len(batch) // KEY_BYTES
                newest[gen] = max(newest[gen], at)
                if now - at < self._ttl_ns:
                    for i in range(0, len(batch), KEY_BYTES):
                        key = batch[i:i + KEY_BYTES]
                        keys[key] = max(at, keys.get(key, 0))
        self._gen = 0 if newest[0] >= newest[1] else 1
        self._count = counts[self._gen]
        self._fd = os.open(self._file(self._gen), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return keys

    def _read(self, gen: int) -> Iterable[tuple[int, bytes]]:
        path = self._file(gen)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        offset = 0
        while offset + _BATCH.size <= len(data):
            count, crc, at = _BATCH.unpack_from(data, offset)
            start, end = offset + _BATCH.size, offset + _BATCH.size + count * KEY_BYTES
            if end > len(data):
                return  # torn at the end: that request was never answered
            batch = data[start:end]
            if zlib.crc32(batch) != crc:
                aside = path.with_suffix(".corrupt")
                _log.error("state dir: %s has a damaged entry at offset %d; the %d bytes before it are used, the "
                           "file is set aside as %s", path, offset, offset, aside.name)
                os.replace(path, aside)
                return
            yield at, batch
            offset = end

    def append(self, keys: bytes) -> None:
        if not keys:
            return
        count = len(keys) // KEY_BYTES
        if self._count + count > self._size and self._count:
            self._switch()
        write_all(self._fd, _BATCH.pack(count, zlib.crc32(keys), time.time_ns()) + keys)
        if self._fsync:
            os.fsync(self._fd)
        self._count += count

    def _switch(self) -> None:
        os.close(self._fd)
        self._gen = 1 - self._gen
        self._fd = os.open(self._file(self._gen), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        self._count = 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _file(self, gen: int) -> Path:
        return self._dir / f"{gen}.log"


class PersistentDeduper(SpanDeduper):
    """A SpanDeduper whose accepted keys also go to the dedupe log, and that knows the keys a
    previous process accepted (as duplicates, whatever their content: see the module docstring)."""

    def __init__(self, max_size: int, ttl_seconds: float, log: DedupeLog, restored: dict[bytes, int],
                 wall: Callable[[], int] = time.time_ns):
        super().__init__(max_size, ttl_seconds)
        self._log = log
        self._restored = restored
        self._ttl_ns = int(ttl_seconds * 1e9)
        self._wall = wall
        self._expires = max(restored.values(), default=0) + self._ttl_ns

    def restore(self, keys: bytes) -> None:
        """Keys of requests still in the queue (their dedupe log entry may have been cut short)."""
        now = self._wall()
        for i in range(0, len(keys), KEY_BYTES):
            self._restored[keys[i:i + KEY_BYTES]] = now
        self._expires = max(self._expires, now + self._ttl_ns)

    def check(self, key: Key, content: Content) -> str:
        if self._restored:
            if self._wall() >= self._expires:  # all of them too old now: memory back at once
                self._restored.clear()
            at = self._restored.get(key)
            if at is not None:
                if self._wall() - at < self._ttl_ns:
                    return DUPLICATE
                del self._restored[key]
        return super().check(key, content)

    def remember_all(self, spans: Iterable[tuple[Key, Content]]) -> None:
        spans = list(spans)
        super().remember_all(spans)
        self._log.append(b"".join(key for key, _ in spans))

    def __len__(self) -> int:
        return super().__len__() + len(self._restored)


class Opened:
    """A state directory opened at start: the deduper that remembers across restarts, the spool
    for the forward queue (None without a queue) and what the previous process left in it."""

    def __init__(self, *, state: StateDir, deduper: PersistentDeduper, log: DedupeLog, spool: Optional[Spool],
                 recovered: list[Any], findings: Spool, findings_recovered: list[Any], dense_seq: bool):
        self.findings = findings
        self.findings_recovered = findings_recovered
        self.state = state
        self.deduper = deduper
        self.spool = spool
        self.recovered = recovered
        self._log = log
        self.dense_seq = dense_seq  # the receiver's dense_seq, saved with each open run (snapshot.py)

    def close(self) -> None:
        self._log.close()
        self.state.close()


def open_state(config: ReceiverConfig, state: Optional[StateDir] = None) -> Opened:
    """The state directory of `config.state_dir` (locked already when `state` is given), and
    what the previous process left in it."""
    assert config.state_dir is not None
    path, fsync = config.state_dir, config.state_fsync
    dedupe_size, dedupe_seconds = config.dedupe_size, config.dedupe_seconds
    queue = not config.findings_only and config.forward_queue_bytes > 0
    state = state if state is not None else StateDir(path, fsync, config.listen)
    log = DedupeLog(directory=state.path / "dedupe", size=dedupe_size, ttl_seconds=dedupe_seconds, fsync=fsync)
    deduper = PersistentDeduper(max_size=dedupe_size, ttl_seconds=dedupe_seconds, log=log, restored=log.load())
    spool, recovered = None, []
    if queue:
        spool = state.spool()
        recovered = spool.recover()
        for r in recovered:
            deduper.restore(r.keys)
    elif any((state.path / "queue").glob("*.seg")):
        _log.warning("state dir: %s holds queued requests, but this receiver has no forward queue "
                     "(forward_queue_bytes 0 or findings-only): they stay there until one starts with it",
                     state.path / "queue")
    findings = Spool(state.path / "findings", fsync=fsync)
    findings_recovered = findings.recover()
    if state.previous_alive_ns is not None:
        _log.info("state dir %s: a previous receiver was alive until %s; %d span keys remembered",
                  path, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(state.previous_alive_ns / 1e9)), len(deduper))
    return Opened(state=state, deduper=deduper, log=log, spool=spool, recovered=recovered, findings=findings,
                  findings_recovered=findings_recovered, dense_seq=config.dense_seq)
