"""How a run ended, recorded on the current span by the application or an adapter: a fact of
the run, never inferred from its calls (docs/scoring.md, `termination_reason`)."""

from __future__ import annotations

import logging

from ..calls import TERMINATION_REASONS

_log = logging.getLogger("otel_loopguard")


def record_termination(reason: str, *, terminal_response: bool = True) -> None:
    """Record how the run ended on the current span (never inferred from the calls).

    Reasons: final_answer, loop_guard, turn_limit, budget, deadline, tool_error, cancelled.
    """
    from opentelemetry import trace  # the API only: the core below never needs it

    if reason not in TERMINATION_REASONS:
        raise ValueError(f"termination reason must be one of {', '.join(TERMINATION_REASONS)}, got {reason!r}")
    span = trace.get_current_span()
    if not span.get_span_context().is_valid:  # outside any span the facts would vanish
        _log.warning(
            "record_termination(%r): no span is current, so nothing is recorded; call it inside "
            "the run's span (e.g. the agent's root span) before it ends", reason)
        return
    span.set_attribute("loopguard.termination_reason", reason)
    span.set_attribute("loopguard.terminal_response", terminal_response)
