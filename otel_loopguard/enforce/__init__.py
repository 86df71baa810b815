"""Enforce mode: the guard, consulted before dispatch, and its adapters.

    guard = otel_loopguard.guard()          # uses OTEL_LOOPGUARD_KEY / policy like install()

    @guard.tool
    def lookup_order(order_id: str) -> dict: ...
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

from .decorator import current_run_id, guarded, nudge, record_decision
from .guard import ALLOW, DENY, WARN, Decision, Guard


class ToolGuard(Guard):
    """A Guard with the decorator attached: `@guard.tool` or `@guard.tool(name=...)`."""

    def tool(self, fn: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None) -> Any:
        if fn is None:
            return guarded(self, name)
        return guarded(self, name)(fn)


def make_guard(*, policy: Optional[str | os.PathLike[str]] = None, key: Optional[bytes | str] = None,
               key_file: Optional[str] = None, enforce: bool = True) -> ToolGuard:
    """The guard with the settings install() uses: the argument, else OTEL_LOOPGUARD_POLICY
    and OTEL_LOOPGUARD_KEY[_FILE]. Both must agree, or the guard judges by other rules than
    the processor that records its decisions."""
    from ..fingerprint import Fingerprinter, load_key
    from ..policy import load_policy

    digest_key = load_key(key=key, key_file=key_file) if (key or key_file) else load_key()
    if policy is None:
        from ..processor.config import resolve  # the variables read exactly as install() reads them

        policy = resolve({}).policy
    return ToolGuard(Fingerprinter(digest_key, load_policy(policy)), enforce=enforce)



__all__ = ["ALLOW", "DENY", "WARN", "Decision", "Guard", "ToolGuard", "current_run_id", "guarded",
           "make_guard", "nudge", "record_decision"]
