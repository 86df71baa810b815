"""The receiver's memory bound: every structure that grows with traffic counts toward one limit.

The estimate is held to two thirds of `memory_limit_mib` less a fixed allowance
(working_bytes). The allowance is what handling requests costs whatever the bound (gRPC's
buffers, protobuf's parses, the garbage of decoding not yet reused); the third is the
allocators' slack, freed memory that a few surviving objects pin (CPython's pools, glibc's
heap). The working bytes are split in quarters so no one structure can starve the others:
- the dedupe table holds at most a quarter's worth of entries (fewer if `dedupe_size` says
  so); beyond that its oldest entries go (counted: `dedupe_evictions_total`);
- the forward queue holds at most a quarter (or `forward_queue_bytes`, if smaller); full, it
  answers UNAVAILABLE with RetryInfo at once;
- open runs may use a quarter (and `max_open_runs`, `max_buffered_calls`); beyond that the
  least recently active runs are judged now as `incomplete_trace` (shed), never refused: one
  sender's traces that never complete cannot freeze intake for everyone;
- the rest is for requests being decoded, finding spans on their way and the bounded side
  tables. When the whole estimate would pass the limit, a request is answered UNAVAILABLE
  with RetryInfo before it is decoded.

The costs are estimates per entry, measured (tracemalloc, then the resident memory of the
overload scenario in bench/chaos.py) and rounded up, so the estimate runs ahead of the heap and
the process's resident memory stays within the limit plus its fixed baseline (the interpreter,
gRPC and protobuf). The measurements behind each constant: docs/performance.md, "Memory bound".
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sized
from typing import Optional, Protocol

MIB = 1024 * 1024
# Resident bytes, not just live ones: the allocator's slack comes on top of what tracemalloc sees.
DEDUPE_ENTRY_BYTES = 240  # key, content id, age entry
RUN_BYTES = 32 * 1024  # an open run: its detector, trail and maps
CALL_BYTES = 640  # each call an open run has seen: the detector's bounded containers grow with it
HELD_CALL_BYTES = 1024  # a call held for order, its sketches and journal entry included
SIDE_ENTRY_BYTES = 200  # an entry of the side tables (roots, completed runs, parent times)
FINDING_SPAN_BYTES = 4096  # a finding or run span waiting for the downstream
# A request being handled: its bytes, the protobuf parse and its decoded facts: four times its
# size covers the three at once.
REQUEST_FACTOR = 4
DECODED_SPAN_BYTES = 1024  # a decoded span's facts
SHED_TO = 0.9  # shed runs down to this fraction of their bounds: not one run per request


@dataclass(frozen=True)
class Usage:
    """Estimated bytes, by structure."""

    dedupe: int
    runs: int
    forward_queue: int
    findings: int
    requests: int
    side_tables: int

    @property
    def total(self) -> int:
        return self.dedupe + self.runs + self.forward_queue + self.findings + self.requests + self.side_tables


HANDLING_MIB = 48  # the cost of handling requests at all, whatever the bound


def working_bytes(memory_limit_mib: int) -> int:
    """What the estimate may reach: two thirds of the bound less the cost of handling requests."""
    return max(memory_limit_mib - HANDLING_MIB, 1) * MIB * 2 // 3


def dedupe_entries(limit_bytes: int, dedupe_size: int) -> int:
    """The dedupe table's entry cap: `dedupe_size`, or what a quarter of the limit holds."""
    return max(1, min(dedupe_size, limit_bytes // 4 // DEDUPE_ENTRY_BYTES))


def forward_queue_bytes(limit_bytes: int, configured: int) -> int:
    """The forward queue's byte cap: `forward_queue_bytes` (0: no queue), at most a quarter."""
    return min(configured, limit_bytes // 4) if configured > 0 else 0


def side_table_entries(limit_bytes: int) -> int:
    """Each of the five bounded side tables of the run assembler gets a fortieth of the limit."""
    return max(1000, limit_bytes // 40 // SIDE_ENTRY_BYTES)


def largest_request(limit_bytes: int) -> int:
    """A request whose handling alone would take more than a quarter of the limit is refused
    for good (retrying cannot help): the sender must send smaller batches."""
    return limit_bytes // 4 // REQUEST_FACTOR


# What the budget reads of the structures it counts: it sits below them all (ops/), so it names
# the few properties it needs rather than importing the stages.
class Runs(Protocol):
    """The run assembler (runs/assembly.py)."""

    @property
    def runs(self) -> Sized: ...
    @property
    def open_calls(self) -> int: ...
    @property
    def buffered_calls(self) -> int: ...
    @property
    def side_entries(self) -> int: ...


class Findings(Protocol):
    """The finding queue (out/finding_queue.py)."""

    @property
    def size(self) -> int: ...


class Queue(Protocol):
    """The forward queue (out/delivery.py)."""

    @property
    def size_bytes(self) -> int: ...


class MemoryBudget:
    def __init__(self, *, limit_bytes: int, max_open_runs: int, max_buffered_calls: int, deduper: Sized,
                 assembler: Runs, findings: Findings, queue: Optional[Queue]):
        self.limit = limit_bytes
        self._max_runs = max_open_runs
        self._max_calls = max_buffered_calls
        self._deduper = deduper
        self._assembler = assembler
        self._findings = findings
        self._queue = queue
        self.requests = 0  # estimated bytes of the requests being handled now

    def runs_bytes(self) -> int:
        a = self._assembler
        return len(a.runs) * RUN_BYTES + a.open_calls * CALL_BYTES + a.buffered_calls * HELD_CALL_BYTES

    def usage(self) -> Usage:
        return Usage(
            dedupe=len(self._deduper) * DEDUPE_ENTRY_BYTES,
            runs=self.runs_bytes(),
            forward_queue=self._queue.size_bytes if self._queue is not None else 0,
            findings=self._findings.size * FINDING_SPAN_BYTES,
            requests=self.requests,
            side_tables=self._assembler.side_entries * SIDE_ENTRY_BYTES,
        )

    def runs_over(self, fraction: float = 1.0) -> bool:
        """Open runs above their share or count bounds (times `fraction`)."""
        a = self._assembler
        return (len(a.runs) >= self._max_runs * fraction or a.buffered_calls >= self._max_calls * fraction
                or self.runs_bytes() >= self.limit // 4 * fraction)

    def runs_under_target(self) -> bool:
        return not self.runs_over(SHED_TO)

    def room_for(self, size: int) -> bool:
        """Whether a request of `size` bytes may be handled now: the estimate stays within the limit."""
        return self.usage().total + size * REQUEST_FACTOR <= self.limit

    def reserve(self, size: int) -> int:
        cost = size * REQUEST_FACTOR
        self.requests += cost
        return cost

    def reserve_decoded(self, size: int, spans: int) -> int:
        """Once decoded, what a request's facts take beyond the first guess."""
        cost = max(0, size * 2 + spans * DECODED_SPAN_BYTES - size * REQUEST_FACTOR)
        self.requests += cost
        return cost

    def release(self, cost: int) -> None:
        self.requests -= cost
