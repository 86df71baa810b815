"""The records every stage shares.

`RawCall` is what a shell (processor, receiver, audit reader) extracts from its
input. `ToolCall` is the compact, fingerprinted record the detectors see: it
holds digests and small progress evidence, never raw payloads, so a buffered
run stays small and carries nothing sensitive.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional

# Every record here is frozen, slotted and built by keyword only (kw_only): a field is added
# in one place, its class, and no caller depends on the order fields are declared in
# (tests/test_records.py). The dataclasses' own __init__ is used as generated.


@dataclass(slots=True, kw_only=True)  # not frozen: a frozen one costs more to build (docs/performance.md, "Records")
class RawCall:
    """One tool call as read from telemetry, before fingerprinting.

    `arguments` and `result` may be JSON text, already-parsed values, or None
    when the shell only has precomputed digests (`args_digest`/`result_digest`,
    e.g. from spans the in-process processor already tagged).
    """

    seq: int
    tool: str
    arguments: Any = None
    result: Any = None
    ok: Optional[bool] = True
    finished: bool = True
    turn: Optional[int] = None
    call_id: Optional[str] = None
    span_id: Optional[str] = None
    start_ns: Optional[int] = None
    end_ns: Optional[int] = None
    identity: Mapping[str, Any] = field(default_factory=dict)
    args_digest: Optional[str] = None
    result_digest: Optional[str] = None
    dispatched: bool = True  # False: a guard denied it before it ran
    guard: Optional[str] = None  # kind of a guard decision recorded on this call
    key_id: Optional[str] = None  # key id of precomputed digests
    trace_id: Optional[str] = None
    parent_id: Optional[str] = None
    # The source numbers its calls 1..N with no gap (the processor's loopguard.seq): a gap
    # in such a sequence is missing evidence. Otherwise seq only orders calls.
    seq_dense: bool = False
    # loopguard.result.exact_digest: the result's digest before volatile-shaped values were
    # masked, when masking changed it (result_digest is the masked one).
    result_exact_digest: Optional[str] = None
    # The result's and arguments' equivalence sketches as a tagged span carries them
    # (loopguard.result.shape_digest, .items, ...; docs/equivalence.md), for a call whose
    # payloads are absent. None: computed from the payloads, if any.
    equivalence: Optional["Equivalence"] = None

    def renumbered(self, seq: int, turn: Optional[int]) -> "RawCall":
        """A copy in its place in the run (otlp/order.py): every other field kept."""
        return replace(self, seq=seq, turn=turn)


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """Progress signals extracted from one observation by the tool's rule.

    Only the few values a progress rule compares are kept; item ids are kept
    as short hashes.
    """

    version: Optional[float] = None
    state: Optional[str] = None
    terminal: bool = False
    cursor: Optional[str] = None
    item_ids: tuple[int, ...] = ()
    error_count: Optional[int] = None


_ITEM = struct.Struct(">Q")


@dataclass(frozen=True, slots=True, kw_only=True)
class Equivalence:
    """What makes two calls "the same" beyond equal digests (docs/equivalence.md): keyed
    sketches of the result's shape and items and of the arguments, never content.

    Built by fingerprint_call from payloads, or read from a tagged span's attributes."""

    shape: Optional[str] = None  # keyed digest of the result's shape form, when it differs from `result`
    # Keyed 64-bit hashes of the result's content items, sampled (see level), ascending, 8 bytes
    # each (bytes, not a tuple of ints: a held call stays small in the receiver).
    items: bytes = b""
    item_count: Optional[int] = None  # content items the result holds; None: not known
    level: int = 0  # items kept are those whose hash has `level` leading zero bits (0: all)
    empty_list: bool = False  # the result holds an empty list: a read that found nothing
    echoed: int = 0  # parts of the result that only repeat the call's own arguments
    sketch: Optional[bytes] = None  # the arguments' similarity sketch: 16 slots of 2 bytes
    failed: Optional[str] = None  # the result field or convention that reports a failure
    # A long text result's similarity sketch: RESULT_SLOTS slots of 2 bytes (canon/sketch.py).
    result_sketch: Optional[bytes] = None
    noop: bool = False  # the arguments are a shell command that changes and reads nothing (conventions/shell.py)

    @property
    def item_hashes(self) -> tuple[int, ...]:
        """`items` as integers."""
        return tuple(h for (h,) in _ITEM.iter_unpack(self.items))

    @property
    def ack(self) -> bool:
        """No content of its own: empty, status words only, or its own arguments echoed,
        and no empty list (a read that found nothing is an answer, not an acknowledgement)."""
        return self.item_count == 0 and not self.empty_list


NO_EQUIVALENCE = Equivalence()


def judged_equivalence(eq: Equivalence, shape: bool, items: bool, echo: bool) -> Equivalence:
    """`eq` as a policy's switches let the judges see it (policy `equivalence.shape`, `.items`,
    `.echo`): what a switch turns off is as if never computed."""
    if shape and items and echo:
        return eq
    count = eq.item_count
    if not echo and count is not None:
        count += eq.echoed  # an echo is content again (it was never hashed: novelty falls back on digests)
    return Equivalence(shape=eq.shape if shape else None, items=eq.items if items else b"",
                       item_count=count if items else None, level=eq.level if items else 0,
                       empty_list=eq.empty_list if items else False, echoed=eq.echoed if echo else 0,
                       sketch=eq.sketch, failed=eq.failed, noop=eq.noop if echo else False,
                       result_sketch=eq.result_sketch)


@dataclass(slots=True, kw_only=True)  # not frozen: a frozen one costs more to build (docs/performance.md, "Records")
class ToolCall:
    """A fingerprinted tool call, the unit every detector observes."""

    seq: int
    tool: str
    action: str  # keyed digest of tool + canonical arguments + identity
    result: Optional[str]  # keyed digest of the canonical result, None if absent
    ok: Optional[bool]
    turn: Optional[int] = None
    call_id: Optional[str] = None
    span_id: Optional[str] = None
    start_ns: Optional[int] = None
    end_ns: Optional[int] = None
    evidence: Evidence = Evidence()
    trace_id: Optional[str] = None  # hex; where finding spans about this call go
    parent_id: Optional[str] = None  # hex span id of the call span's parent
    write: Optional[str] = None  # digest of the write without its idempotency key
    write_key: Optional[str] = None  # digest of the idempotency key value, if any
    flags: frozenset[str] = frozenset()
    # The result's digest with nothing masked, when masking volatile-shaped values changed it
    # (`result` is the masked one): new information across actions is judged on this one.
    exact: Optional[str] = None
    # Shape digest, item hashes, argument sketch, result-reported failure (docs/equivalence.md).
    equivalence: Equivalence = NO_EQUIVALENCE

    def renumbered(self, seq: int, turn: Optional[int]) -> "ToolCall":
        """A copy in its place in the run (see RawCall.renumbered)."""
        return replace(self, seq=seq, turn=turn)


# key_id of a call whose digests the judging process computes itself, with its own key.
LOCAL_KEY = "local"

TERMINATION_REASONS = (
    "final_answer",
    "loop_guard",
    "turn_limit",
    "budget",
    "deadline",
    "tool_error",
    "cancelled",
    "unknown",
)


@dataclass(frozen=True, kw_only=True)
class RunFacts:
    """What the application itself recorded about how a run ended.

    Never inferred from the calls: a run that repeats and then ends is not
    `loop_guard` unless something recorded that reason.
    """

    termination_reason: str = "unknown"
    terminal_response: Optional[bool] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardEvent:
    """A guard decision recorded as a span event (docs/guard.md): a denied call has no
    span of its own, so its place in the run is given by the event's time."""

    time_ns: int
    kind: Optional[str]
    dispatched: bool  # False: the call was denied before it ran
    tool: Optional[str] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedDecision:
    """Any `loopguard.decision` event as recorded (docs/findings.md, "Decision events"): what
    a guard did (`deny`, `warn`) or, observing, would have done (`would_block`, `would_warn`).
    Calibrate replays them; the score reads only the denials (GuardEvent)."""

    verb: str
    kind: Optional[str] = None
    tool: Optional[str] = None
    # The call it sits on or was taken in place of; None: after the run's last call.
    seq: Optional[int] = None
    reason: Optional[str] = None
    policy_version: Optional[str] = None


@dataclass(slots=True, kw_only=True)  # not frozen: a frozen one costs more to build (docs/performance.md, "Records")
class ModelCall:
    """One model decision: counts turns and prices tokens for the budgets."""

    turn: int
    input_tokens: int = 0
    output_tokens: int = 0
    model: Optional[str] = None
    end_ns: Optional[int] = None
    # Only an OpenInference LLM span's, where the receiver reads them: its span id and its
    # record of the conversation (call id -> position of the message that asked for it,
    # conventions/conversation.py), for the calls it is the parent of (otlp/order.enclosed_turns).
    # None: no record (another convention, or more entries than the reader keeps).
    span_id: Optional[str] = None
    requested: Optional[Mapping[str, int]] = None
