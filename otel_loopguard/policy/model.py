"""The policy: defaults plus per-tool rules. Immutable; built by `load.py`.

Every default here is documented in docs/policy.md; a test keeps the two in step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Optional

BUILTIN_VERSION = "builtin-1"

DEFAULT_RESULT_VOLATILE = frozenset(
    # loop_guard_notice: the guard's own warn nudge must not make a result look new.
    {"timestamp", "request_id", "trace_id", "span_id", "nonce", "created_at", "loop_guard_notice"}
)


@dataclass(frozen=True)
class RepeatRule:
    """Identical action without progress. `consecutive` (per decision) or `window`."""

    mode: str = "consecutive"
    warn_at: int = 3
    stop_at: int = 5
    window: int = 20
    # False: progress does not clear the count (seed 001 counts every identical call in its
    # window and leaves results to the stale rule); true: a call that made progress restarts it.
    progress_resets: bool = True


@dataclass(frozen=True)
class CycleRule:
    """A block of `min_period`..`max_period` calls repeated; counts repetitions.

    `compare`: what makes two calls one period apart "the same": `results` (default) the
    action, its result and its outcome; `actions` the action alone (seed 001's rule)."""

    min_period: int = 2
    max_period: int = 4
    warn_at: int = 2
    stop_at: int = 3
    compare: str = "results"


@dataclass(frozen=True)
class StreakRule:
    """A run of consecutive bad events: warn at `warn_at`, stop at `stop_at`."""

    warn_at: int
    stop_at: int
    # error_streak only (its loader alone accepts the key): only failures of one tool in a
    # row make a streak (seed 001); by default failing decisions count whatever they called.
    same_tool: bool = False


@dataclass(frozen=True)
class BudgetRule:
    """Run-wide ceilings. None disables one. Warn at `warn_ratio` of each."""

    max_turns: Optional[int] = 25
    max_tool_calls: Optional[int] = 60
    max_cost_usd: Optional[float] = None
    max_seconds: Optional[float] = 300.0
    warn_ratio: float = 0.8


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float


@dataclass(frozen=True)
class ProgressRule:
    """Declared, observable progress for one tool (paths are dotted)."""

    version_field: Optional[str] = None  # result: a number that must increase
    state_field: Optional[str] = None  # result: a value whose change is progress
    terminal_states: tuple[str, ...] = ()  # states that end an episode
    cursor_field: Optional[str] = None  # arguments: the page selector
    items_field: Optional[str] = None  # result: the list of returned items
    item_id_field: str = "id"  # key of an item's identity inside items_field
    errors_field: Optional[str] = None  # result: a list or count that must shrink

    @property
    def declared(self) -> bool:
        return any((self.version_field, self.state_field, self.items_field, self.errors_field))


@dataclass(frozen=True)
class PollRule:
    """A poller: total polls and a deadline, apart from unchanged observations."""

    max_polls: Optional[int] = 20
    deadline_seconds: Optional[float] = None


# Result keys that report a failure by convention (conventions/failures.py says how each is read).
DEFAULT_FAILURE_FIELDS = ("exit_code", "exitCode", "returncode", "return_code", "exit_status", "is_error",
                          "isError", "success", "error")
# Keys that identify a list element by address: a search hit is the page it points to.
DEFAULT_ITEM_FIELDS = ("url", "link", "href", "uri")


@dataclass(frozen=True)
class EquivalenceRule:
    """What makes two calls "the same" beyond equal digests (docs/equivalence.md)."""

    shape: bool = True  # volatile fragments inside result text are masked for same-action comparisons
    items: bool = True  # new information is judged by the result's items, whatever their order
    echo: bool = True  # parts of a result that repeat the call's own arguments bring nothing new
    # Near-duplicate actions: estimated Jaccard similarity of argument tokens at or above which a
    # call that brings nothing new continues the earlier action's `repeat` count; None: off.
    similarity: Optional[float] = 0.6
    failure_fields: tuple[str, ...] = DEFAULT_FAILURE_FIELDS  # result keys that can report a failure
    failure_text: bool = True  # "exit code 1" / "returncode=2" at a text result's head or tail
    item_fields: tuple[str, ...] = DEFAULT_ITEM_FIELDS  # a list element holding one is that item
    items_path: Optional[str] = None  # dotted path to the part of the result that holds the items
    sketch_fields: tuple[str, ...] = ()  # argument paths the sketch reads (empty: all of them)
    exempt: bool = False  # per tool: exact digests only, nothing of the above
    exempt_tools: frozenset[str] = frozenset()  # top level: tools exempt (each gets `exempt: true`)


EXACT_ONLY = EquivalenceRule(shape=False, items=False, echo=False, similarity=None, failure_fields=(),
                             failure_text=False, exempt=True)


@dataclass(frozen=True)
class ToolRule:
    exempt_repeat: bool = False
    # The same action giving the same answer at least every other decision is a loose `cycle`
    # (detect/spread.py); false: for this tool only calls in a row (`repeat`) and whole
    # repeated blocks (`cycle`) count.
    loose_cycle: bool = True
    repeat: Optional[RepeatRule] = None
    progress: Optional[ProgressRule] = None
    ignore_fields: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    identity_fields: tuple[str, ...] = ()
    side_effect: bool = False
    idempotency_key: Optional[str] = None
    poll: Optional[PollRule] = None
    max_calls: Optional[int] = None
    result_volatile_fields: Optional[frozenset[str]] = None
    enforce: Optional[bool] = None
    volatile_values: Optional[bool] = None  # None: the policy's switch
    # Result keys whose values are compared as they are even when id- or time-shaped (a
    # create tool's new record id is progress).
    meaningful_fields: tuple[str, ...] = ()
    equivalence: Optional[EquivalenceRule] = None  # None: the policy's


@dataclass(frozen=True)
class Policy:
    version: str = BUILTIN_VERSION
    repeat: RepeatRule = RepeatRule()
    cycle: CycleRule = CycleRule()
    error_streak: StreakRule = StreakRule(warn_at=2, stop_at=4)
    no_progress: StreakRule = StreakRule(warn_at=3, stop_at=6)
    budget: BudgetRule = BudgetRule()
    prices: Mapping[str, Price] = field(default_factory=lambda: MappingProxyType({}))
    result_volatile_fields: frozenset[str] = DEFAULT_RESULT_VOLATILE
    # Values shaped like generated ids or clock readings are masked before the result digest
    # (canon/volatile.py): two results of one action differing only in them are one.
    volatile_values: bool = True
    max_depth: int = 64
    max_bytes: int = 256 * 1024
    tools: Mapping[str, ToolRule] = field(default_factory=lambda: MappingProxyType({}))
    equivalence: EquivalenceRule = EquivalenceRule()

    def rule(self, tool: str) -> ToolRule:
        return self.tools.get(tool) or _DEFAULT_RULE

    def repeat_for(self, tool: str) -> RepeatRule:
        return self.rule(tool).repeat or self.repeat

    def equivalence_for(self, rule: ToolRule) -> EquivalenceRule:
        """The equivalence rule under a tool's rule (`self.rule(tool)`)."""
        return rule.equivalence or self.equivalence

    def volatile_for(self, tool: str) -> frozenset[str]:
        own = self.rule(tool).result_volatile_fields
        return self.result_volatile_fields if own is None else own

    def price_for(self, model: Optional[str]) -> Optional[Price]:
        return self.prices.get(model or "") or self.prices.get("*")


_DEFAULT_RULE = ToolRule()
