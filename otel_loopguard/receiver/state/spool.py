"""The forward queue on disk (`state_dir`): accepted requests survive a crash or a restart.

Layout under `<state_dir>/queue/`: segment files `NNNNNNNN.seg`, each a file header and then
records appended in acceptance order, and beside each an `NNNNNNNN.ack` file of acknowledgements
(8 bytes each: the record's offset times two, plus its kind). A record of the forward queue needs
two: DELIVERED (the downstream took it, or refused it for good) and JUDGED (every run it fed
has been completed and its findings queued, receiver/state/judged.py); a record of the finding queue
needs only the first. A record is written before its sender is answered; a segment whose every
record has all its acknowledgements, and that is no longer written to, is deleted. At start the
records still missing one are read back, in order: undelivered ones go to the downstream first,
unjudged ones are fed to the detectors again (a crash lost the runs they were part of).

Record: a 16-byte header (payload length, span count, keys length, CRC-32 of payload + keys),
the request bytes, then the (trace id + span id) keys of its spans, so the dedupe table of the
next process knows them even when the crash came before the dedupe log was written.

Durability: every write reaches the operating system before the sender is answered, so a
killed process (SIGKILL, the OOM killer) loses nothing. Only with `fsync` is each write also
forced to the disk before the answer (a machine that loses power then loses nothing either);
without it, a power loss can cost the last seconds the kernel had not written yet.

A torn record at the end of a segment is a write the crash interrupted: its sender was never
answered and will retry, so it is skipped. Anything else that does not read back (a bad header,
a CRC mismatch, a file that is not ours) is logged, its readable records kept, and the file
renamed `*.corrupt` for a person to look at; it is never deleted.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

_log = logging.getLogger("otel_loopguard.receiver")

MAGIC = b"OLGQ\x01\x00\x00\x00"  # "otel-loopguard queue", format version 1
_RECORD = struct.Struct("<IIII")  # payload length, spans, keys length, crc32(payload + keys)
_ACK = struct.Struct("<Q")
DELIVERED, JUDGED = 0, 1
SEGMENT_BYTES = 16 * 1024 * 1024  # a new segment after this many bytes: old ones can be deleted


@dataclass(frozen=True)
class Ref:
    """Where a record lives: its segment's number and its offset in that segment."""

    segment: int
    offset: int


@dataclass(frozen=True, kw_only=True)
class Recovered:
    ref: Ref
    payload: bytes
    spans: int
    keys: bytes  # 24 bytes a span: trace id + span id
    delivered: bool = False
    judged: bool = True  # a spool that does not ask for JUDGED counts every record judged


class Spool:
    def __init__(self, directory: Path, fsync: bool = False, segment_bytes: int = SEGMENT_BYTES,
                 acks: int = 1):
        """`acks`: 1 (DELIVERED only) or 2 (DELIVERED and JUDGED) before a record is done."""
        self._needed = acks
        self._dir = directory
        self._fsync = fsync
        self._segment_bytes = segment_bytes
        self._pending: dict[int, int] = {}  # segment -> acknowledgements still missing
        self._acks: dict[int, int] = {}  # segment -> fd of its .ack file (opened on first use)
        self._active = 0
        self._fd: Optional[int] = None
        self._size = 0
        self.last: Optional[Ref] = None  # the record written last

    # -- start -------------------------------------------------------------------
    def recover(self) -> list[Recovered]:
        """Every record not acknowledged, oldest first; then a fresh segment is opened."""
        self._dir.mkdir(parents=True, exist_ok=True)
        out: list[Recovered] = []
        numbers = sorted(int(p.stem) for p in self._dir.glob("*.seg") if p.stem.isdigit())
        for number in numbers:
            out += self._recover_segment(number)
        self._active = (numbers[-1] if numbers else 0) + 1
        self._open_active()
        salvaged = [r for r in out if r.ref.segment not in self._pending]  # from files set aside
        kept = [r for r in out if r.ref.segment in self._pending]
        for r in salvaged:  # written again, into the new segment, with what was acknowledged of it
            ref = self.append(r.payload, r.spans, r.keys)
            for kind, done in ((DELIVERED, r.delivered), (JUDGED, r.judged and self._needed > 1)):
                if done:
                    self.ack(ref, kind)
            kept.append(Recovered(ref=ref, payload=r.payload, spans=r.spans, keys=r.keys, delivered=r.delivered,
                                  judged=r.judged))
        for number in [n for n, count in self._pending.items() if count == 0 and n != self._active]:
            self._delete(number)
        undelivered = [r for r in kept if not r.delivered]
        if undelivered:
            # At least once: one the downstream took just before a crash, its answer not yet
            # recorded, is sent again (a downstream cannot be asked what it holds).
            _log.info("state dir %s: %d accepted requests (%d spans) not yet delivered are queued again; any the "
                      "downstream took just before the previous process stopped, its answer not yet recorded, may "
                      "reach it a second time", self._dir, len(undelivered), sum(r.spans for r in undelivered))
        return kept

    def _recover_segment(self, number: int) -> list[Recovered]:
        path = self._path(number, "seg")
        data = path.read_bytes()
        acked = self._read_acks(number)
        records, problem = _parse(data)
        out: list[Recovered] = []
        missing = 0
        for offset, payload, spans, keys in records:
            kinds = acked.get(offset, set())
            delivered, judged = DELIVERED in kinds, self._needed < 2 or JUDGED in kinds
            if not (delivered and judged):
                out.append(Recovered(ref=Ref(number, offset), payload=payload, spans=spans, keys=keys,
                                     delivered=delivered, judged=judged))
                missing += (not delivered) + (not judged)
        if problem is None:
            self._pending[number] = missing
            return out
        aside = path.with_suffix(".corrupt")
        _log.error("state dir: %s %s; its %d readable records are kept, the file is set aside as %s",
                   path, problem, len(out), aside.name)
        os.replace(path, aside)
        ack = self._path(number, "ack")
        if ack.exists():
            os.replace(ack, ack.with_suffix(".ack.corrupt"))
        return out

    def _read_acks(self, number: int) -> dict[int, set[int]]:
        try:
            data = self._path(number, "ack").read_bytes()
        except FileNotFoundError:
            return {}
        whole = len(data) - len(data) % _ACK.size  # a torn last entry: that record is sent again
        out: dict[int, set[int]] = {}
        for i in range(0, whole, _ACK.size):
            entry = _ACK.unpack_from(data, i)[0]
            out.setdefault(entry >> 1, set()).add(entry & 1)
        return out

    # -- running -------------------------------------------------------------------
    def append(self, payload: bytes, spans: int, keys: bytes) -> Ref:
        if self._size >= self._segment_bytes:
            self._roll()
        assert self._fd is not None
        ref = Ref(self._active, self._size)
        header = _RECORD.pack(len(payload), spans, len(keys), zlib.crc32(keys, zlib.crc32(payload)))
        write_all(self._fd, header + payload + keys)
        if self._fsync:
            os.fsync(self._fd)
        self._size += _RECORD.size + len(payload) + len(keys)
        self.last = ref
        self._pending[self._active] = self._pending.get(self._active, 0) + self._needed
        return ref

    def ack(self, ref: Ref, kind: int = DELIVERED) -> None:
        """DELIVERED: taken or refused for good, never sent again; JUDGED: never fed to the
        detectors again. A segment done with is deleted."""
        left = self._pending.get(ref.segment, 0) - 1
        self._pending[ref.segment] = left
        if left <= 0 and ref.segment != self._active:
            self._delete(ref.segment)
            return
        fd = self._acks.get(ref.segment)
        if fd is None:
            fd = self._acks[ref.segment] = os.open(self._path(ref.segment, "ack"),
                                                   os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        write_all(fd, _ACK.pack(ref.offset << 1 | kind))

    def close(self) -> None:
        for fd in [*self._acks.values(), *([self._fd] if self._fd is not None else [])]:
            if self._fsync:
                os.fsync(fd)
            os.close(fd)
        self._acks.clear()
        self._fd = None

    # -- segments ----------------------------------------------------------------------
    def _roll(self) -> None:
        done = self._active
        assert self._fd is not None
        os.close(self._fd)
        self._active += 1
        self._open_active()
        if self._pending.get(done, 0) <= 0:
            self._delete(done)

    def _open_active(self) -> None:
        self._fd = os.open(self._path(self._active, "seg"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        write_all(self._fd, MAGIC)
        self._size = len(MAGIC)
        self._pending.setdefault(self._active, 0)

    def _delete(self, number: int) -> None:
        fd = self._acks.pop(number, None)
        if fd is not None:
            os.close(fd)
        for suffix in ("seg", "ack"):
            try:
                self._path(number, suffix).unlink()
            except FileNotFoundError:
                pass
        self._pending.pop(number, None)

    def _path(self, number: int, suffix: str) -> Path:
        return self._dir / f"{number:08d}.{suffix}"


def _parse(data: bytes) -> tuple[list[tuple[int, bytes, int, bytes]], Optional[str]]:
    """The records of one segment, and what is wrong with it (None: nothing, or only a torn end)."""
    if not data.startswith(MAGIC):
        return [], "does not start as an otel-loopguard queue segment (format 1)"
    out: list[tuple[int, bytes, int, bytes]] = []
    offset = len(MAGIC)
    while offset < len(data):
        if offset + _RECORD.size > len(data):
            return out, None  # a torn header at the end: a write the crash cut short
        length, spans, keys_length, crc = _RECORD.unpack_from(data, offset)
        start = offset + _RECORD.size
        end = start + length + keys_length
        if end > len(data):
            return out, None  # a torn record at the end: never acknowledged to its sender
        payload, keys = data[start:start + length], data[start + length:end]
        if zlib.crc32(keys, zlib.crc32(payload)) != crc or keys_length % 24:
            return out, f"has a damaged record at offset {offset}"
        out.append((offset, payload, spans, keys))
        offset = end
    return out, None


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
