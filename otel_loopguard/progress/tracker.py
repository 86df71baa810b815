"""Decide, per call, whether it made progress and whether it brought new information.

Declared rules (docs/policy.md#progress) compare a call with what the same
action showed before: a version above the highest seen, a state different from
the last one, previously unseen item ids, fewer validation errors than ever. Without a
declared rule, a result digest never seen before in the run is the progress; a result that
differs from an earlier answer of the same action only in id- or time-shaped values (a
fresh message id, a fetch time) is not new (canon/volatile.py).
Output size is never a signal.

Equivalence (docs/equivalence.md) refines "new": the same action answering in the same
shape (volatile fragments inside text masked) is nothing new; a result with items brings
something new only with an item never seen before in the run, whatever the order or window;
a result that only echoes its arguments brings nothing. A new action's bare acknowledgement
(an empty success, an echo) is `neutral`: distinct side effects are not a lack of progress.
A shell no-op that succeeded (`true`, `echo "done"`, `cd <dir> && true`: conventions/shell.py)
is neither: it did nothing and brought nothing, a decision without progress.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, replace
from typing import Optional

from ..conventions.failures import exit_status
from ..calls import Equivalence, Evidence, ToolCall, judged_equivalence
from ..policy import Policy, ToolRule
from ..bounded import BoundedMap, BoundedSet
from ..canon.sketch import similarity

MAX_SEEN_RESULTS = 4096
MAX_SEEN_ITEMS = 16384
MAX_TRACKED_ACTIONS = 1024
MAX_SEEN_CONTENT_ITEMS = 8192  # keyed item hashes of results (equivalence)
MAX_SEEN_ACTIONS = 4096  # actions seen in the run, to tell a new action's acknowledgement
MAX_TRACKED_TOOLS = 256  # per tool, the highest item sampling level seen
MAX_NEAR_ANSWERS = 8  # per tool, the last results' sketches a result is compared with
RESULT_NEAR = 0.7  # estimated Jaccard similarity of two results' words at which they are alike
_ITEM_BITS = 64
_ITEM = struct.Struct(">Q")  # one item hash in Equivalence.items


@dataclass(slots=True)
class Judgement:  # treated as immutable; not frozen only because that is slower to build
    progressed: bool  # declared rule fired, or (no rule) the result is new
    novel_result: bool  # the result digest was not seen before in this run
    new_items: int  # previously unseen item ids (declared items rule only)
    terminal: bool  # a declared terminal state was reached
    # A new action's acknowledgement (empty success or echo): in-a-row counts of calls that
    # bring nothing new neither grow nor end on it (docs/equivalence.md).
    neutral: bool = False

    @property
    def new_information(self) -> bool:
        return self.novel_result or self.progressed or self.new_items > 0


_NOVEL = Judgement(progressed=True, novel_result=True, new_items=0, terminal=False)
_SEEN = Judgement(progressed=False, novel_result=False, new_items=0, terminal=False)
_NEUTRAL_NOVEL = Judgement(progressed=True, novel_result=True, new_items=0, terminal=False, neutral=True)
_NEUTRAL_SEEN = Judgement(progressed=False, novel_result=False, new_items=0, terminal=False, neutral=True)


class ProgressTracker:
    """Per-run memory for progress rules, bounded in size."""

    def __init__(self, policy: Policy):
        self._policy = policy
        self._results = BoundedSet(MAX_SEEN_RESULTS)
        self._items = BoundedSet(MAX_SEEN_ITEMS)
        self._best: BoundedMap[str, Evidence] = BoundedMap(MAX_TRACKED_ACTIONS)
        self._masked = BoundedSet(MAX_SEEN_RESULTS)  # (action, masked or shape result digest)
        self._content = BoundedSet(MAX_SEEN_CONTENT_ITEMS)  # keyed item hashes
        self._actions = BoundedSet(MAX_SEEN_ACTIONS)  # hash(action) of every action seen
        self._floors: BoundedMap[str, int] = BoundedMap(MAX_TRACKED_TOOLS)
        # per tool: (argument sketch, result sketch) of its last long text results
        self._answers: BoundedMap[str, deque[tuple[Optional[bytes], bytes]]] = BoundedMap(MAX_TRACKED_TOOLS)

    def judge(self, call: ToolCall, tool_rule: Optional[ToolRule] = None) -> Judgement:
        """`tool_rule`: the call's rule when the caller has it at hand (else looked up)."""
        first_time = self._actions.add(hash(call.action))
        tool_rule = tool_rule or self._policy.rule(call.tool)
        eq = seen_equivalence(call, self._policy, tool_rule)
        near = self._policy.equivalence_for(tool_rule).similarity
        novel = call.result is not None and self._novel(call, eq, not first_time, near)
        rule = tool_rule.progress
        ev = call.evidence
        # A new action answered with nothing but an acknowledgement, an exit status included
        # (grep's "no match"): neutral (docs/equivalence.md).
        neutral = (first_time and call.result is not None and eq.ack
                   and (call.ok is True or exit_status(call.equivalence.failed)))
        new_items = sum(1 for i in ev.item_ids if self._items.add((call.tool, i))) if ev.item_ids else 0
        if rule is None or not rule.declared:
            if not new_items and not ev.terminal:
                if eq.noop and call.ok is not False and eq.failed is None:
                    return _SEEN  # a no-op that did nothing: no work, nothing new (conventions/shell.py)
                if neutral:
                    return _NEUTRAL_NOVEL if novel else _NEUTRAL_SEEN
                return _NOVEL if novel else _SEEN  # most calls: shared, never mutated
            return Judgement(progressed=novel, novel_result=novel, new_items=new_items, terminal=ev.terminal,
                             neutral=neutral)
        best = self._best.get(call.action)
        self._best.put(call.action, _best_so_far(best, ev))
        if best is None:
            # A first observation: with an items rule only unseen items count.
            progressed = new_items > 0 if rule.items_field else True
        else:
            progressed = _advanced(best, ev) or new_items > 0
        return Judgement(progressed=progressed, novel_result=novel, new_items=new_items, terminal=ev.terminal,
                         neutral=neutral)

    def _novel(self, call: ToolCall, eq: Equivalence, answered: bool, near: Optional[float] = None) -> bool:
        """A result never seen before in the run. When masking id- and time-shaped values
        changed its digest (`call.exact` set), the exact result must be unseen in the run and
        the masked one unseen for this action: a fresh message id on the same answer to the
        same request is nothing new, while another page of new ids is. With equivalence
        sketches (docs/equivalence.md), the shape form stands in for the masked one, and a
        result with items is new only with an item never seen in the run; a long text result
        near (RESULT_NEAR) the answer a near-duplicate request had (another action of the tool,
        arguments at least `near` alike) brings nothing new unless it brings more than one new
        item (a reworded opening line is one). The same action's changed answer is judged on
        its items alone: a poll whose one line of progress moved is news.
        `answered`: the action was called before in the run."""
        if eq.item_count is None and eq.shape is None:
            if call.exact is None:
                return self._results.add(call.result)  # nothing was masked, no sketch
            fresh = self._results.add(call.exact)
            return self._masked.add((call.action, call.result)) and fresh
        fresh = self._results.add(call.exact or call.result)
        same_answer = not self._masked.add((call.action, eq.shape or call.result))
        new_item = self._new_content(call.tool, eq, answered)
        near_answer = (near is not None and eq.result_sketch is not None
                       and self._near_answer(call, eq, near, eq.result_sketch))
        if same_answer:
            return False  # the same action gave this answer before, noise aside
        if near_answer and (new_item is None or new_item <= 1):
            return False  # a near-duplicate answer to the same or a near-duplicate request
        if answered and eq.level:
            return True  # the same request's answer changed, and its sample may not show where
        if new_item is not None:
            return new_item > 0
        if eq.item_count == 0 and eq.echoed:
            return False  # nothing but its own arguments (and emptiness)
        return fresh

    def _near_answer(self, call: ToolCall, eq: Equivalence, near: float, result: bytes) -> bool:
        """Whether a recent call of this tool with other arguments at least `near` alike had a
        result at least RESULT_NEAR alike; this call's sketches are kept for the next ones."""
        recent = self._answers.get(call.tool)
        if recent is None:
            recent = deque(maxlen=MAX_NEAR_ANSWERS)
            self._answers.put(call.tool, recent)
        args = eq.sketch
        found = any(a != args and similarity(a, args) >= near and similarity(r, result) >= RESULT_NEAR
                    for a, r in recent)
        recent.append((args, result))
        return found

    def _new_content(self, tool: str, eq: Equivalence, answered: bool) -> Optional[int]:
        """How many items never seen before in the run the result brought; None when its
        items cannot tell (none, or none at the sampling level the run's answers need).

        Items are sampled at a level (fingerprint/equivalence.py): for an action called for
        the first time, an item is judged only at the highest level this tool's answers were
        sampled at, where every earlier answer kept all its items, so an item is never taken
        for new because a sample left it out (a window of lines already read). The same action
        asked again is judged on all its kept items: its answer changed, and an unseen item
        there is the change."""
        if not eq.item_count or not eq.items:
            return None
        floor = self._floors.get(tool) or 0
        if eq.level > floor:
            self._floors.put(tool, eq.level)
            floor = eq.level
        if answered:
            floor = 0
        judged = False
        new = 0
        content = self._content
        for (h,) in _ITEM.iter_unpack(eq.items):
            added = content.add(h)
            if _ITEM_BITS - h.bit_length() >= floor:
                judged = True
                new += added
        return new if judged else None


def seen_equivalence(call: ToolCall, policy: Policy, rule: ToolRule) -> Equivalence:
    """The call's equivalence as the policy's switches let the judges see it."""
    sw = policy.equivalence_for(rule)
    return judged_equivalence(call.equivalence, sw.shape, sw.items, sw.echo)


def _best_so_far(best: Optional[Evidence], ev: Evidence) -> Evidence:
    """Highest version and fewest errors seen for the action, and its latest state."""
    if best is None:
        return ev
    version = max((v for v in (best.version, ev.version) if v is not None), default=None)
    errors = min((e for e in (best.error_count, ev.error_count) if e is not None), default=None)
    return replace(ev, version=version, error_count=errors)


def _advanced(before: Evidence, after: Evidence) -> bool:
    return (
        _greater(after.version, before.version)
        or (after.state is not None and after.state != before.state)
        or _greater(before.error_count, after.error_count)
    )


def _greater(a: Optional[float], b: Optional[float]) -> bool:
    return a is not None and b is not None and a > b
