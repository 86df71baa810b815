"""The words a person reads: a stop's next step, and the release rule in plain words (pure).

The rule names (`uncontained_loop` ...) stay what queries and the JSON report use; these
sentences are for text, HTML and JUnit output and for a finding's reason.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from .model import AT_NEXT_CALL_KINDS, INTEGRITY_KINDS, STOP, TOOL_LEVEL_KINDS, Finding

GUARD_DOC = "docs/guard.md"

PLAIN_RULES = {
    "duplicate_write": "a call that changes something may have run twice",
    "side_effect_after_guard": "a call that changes something ran after the guard said stop",
    "uncontained_loop": "the agent kept going after a stop finding ({detail}): "
                        f"enforce mode would have denied the next call (see {GUARD_DOC})",
    "guard_after_dispatch": "the guard acted only after the call it should have stopped had run",
    "executed_after_guard": "a call ran after the guard denied one",
    "guard_too_late": "the guard acted later than it should have: {detail}",
    "limit_after_unchanged_calls": "the agent repeated unchanged calls until a hard limit ended the run",
    "poll_without_terminal": "polling ran out of budget and the run ended without a deadline or guard answer",
    "no_terminal_response": "the guard fired but no safe answer to the user was recorded",
}


def next_step(f: Finding) -> Optional[str]:
    """What enforce mode would have done about a stop; None for other findings."""
    if f.severity != STOP or f.kind in INTEGRITY_KINDS or not f.last_seq:
        return None
    if f.kind in TOOL_LEVEL_KINDS:
        what = f"{f.tool or 'this tool'}'s calls after call {f.last_seq}"
    elif f.kind in AT_NEXT_CALL_KINDS:
        what = f"the call after call {f.last_seq}"
    else:
        what = f"call {f.last_seq}"
    return f"enforce mode would deny {what}: see {GUARD_DOC}"


def with_next_step(f: Finding) -> Finding:
    """The finding with its reason ending in the next step (once, whatever calls it again)."""
    step = next_step(f)
    if step is None or f.reason.endswith(step):
        return f
    return replace(f, reason=f"{f.reason.rstrip().rstrip('.')}; {step}")


def plain_rule(violation: str) -> str:
    """`uncontained_loop: stop-level findings (repeat) ...` in words, the rule's name after them."""
    name, _, detail = violation.partition(": ")
    template = PLAIN_RULES.get(name)
    if template is None:
        return violation
    if name == "uncontained_loop":
        detail = detail[detail.find("(") + 1: detail.find(")")] if "(" in detail else detail
    return f"{template.format(detail=detail)} [{name}]"
