"""`duplicate_write`: a side-effecting call repeated without the same idempotency key.

Reusing the key is a safe retry; a different or missing key may act twice
(a second refund, a second email), whatever the second response says.
"""

from __future__ import annotations

from typing import Optional

from ..bounded import BoundedMap
from ..calls import ToolCall
from ..findings import STOP, Finding, finding
from ..policy import Policy, ToolRule
from .base import Step

MAX_WRITES = 1024  # distinct writes remembered per run


class DuplicateWriteDetector:
    kind = "duplicate_write"

    @staticmethod
    def applies(rule: ToolRule) -> bool:
        return rule.side_effect  # only side-effecting tools write

    def __init__(self, policy: Policy):
        self._seen: BoundedMap[str, ToolCall] = BoundedMap(MAX_WRITES)

    def preview(self, step: Step) -> Optional[tuple[str, str]]:
        call = step.call
        if not step.rule.side_effect or call.write is None:
            return None
        first = self._seen.get(call.write)
        if first is None or (call.write_key is not None and call.write_key == first.write_key):
            return None
        return "stop", (
            f"{call.tool} already ran with the same arguments (call {first.seq}) and this call does not "
            "reuse its idempotency key: running it may repeat the side effect"
        )

    def observe(self, step: Step) -> list[Finding]:
        call = step.call
        if not step.rule.side_effect or call.write is None:
            return []
        first = self._seen.get(call.write)
        if first is None:
            self._seen.put(call.write, call)
            return []
        if call.write_key is not None and call.write_key == first.write_key:
            return []  # same idempotency key: the service deduplicates it
        why = "a different idempotency key" if call.write_key and first.write_key else "no idempotency key"
        reason = (
            f"{call.tool} ran again with the same arguments and {why} "
            f"(first at call {first.seq}): the side effect may have happened twice"
        )
        return [finding("duplicate_write", STOP, [first, call], reason, tool=call.tool, action=call.action)]
