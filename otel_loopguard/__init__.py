"""otel-loopguard: catch AI agents stuck in tool-call loops, from OpenTelemetry spans.

The pure core (canon, policy, conventions, progress, findings, detect, fingerprint,
score) imports nothing from gRPC or the OpenTelemetry SDK; the audit CLI
is a thin shell around it. See docs/architecture.md.
"""

from __future__ import annotations

from .version import __version__


def install(**kwargs: object) -> "object":
    """Add otel-loopguard to the application's tracing (see otel_loopguard.processor.install)."""
    from .processor import install as _install  # the SDK is imported only when installing

    return _install(**kwargs)  # type: ignore[arg-type]


def guard(**kwargs: object) -> "object":
    """A guard for enforce mode: `@guard.tool` wraps plain Python tools (docs/guard.md).

    Keyword arguments: mode ("enforce" | "observe"; default OTEL_LOOPGUARD_MODE, else
    install(mode=...), else enforce), policy (a file; default OTEL_LOOPGUARD_POLICY), key or
    key_file (default OTEL_LOOPGUARD_KEY[_FILE]), enforce (True | False, the older spelling of
    mode). Any other argument is refused with a TypeError naming it."""
    from .enforce import GUARD_ARGUMENTS, check_arguments, make_guard

    check_arguments("otel_loopguard.guard()", kwargs, GUARD_ARGUMENTS)
    return make_guard(**kwargs)  # type: ignore[arg-type]


def record_termination(reason: str, *, terminal_response: bool = True) -> None:
    """Record how the run ended on the current span (never inferred from the calls).

    Reasons: final_answer, loop_guard, turn_limit, budget, deadline, tool_error, cancelled.
    """
    from .enforce.termination import record_termination as _record

    _record(reason, terminal_response=terminal_response)


def set_mode(mode: str) -> None:
    """Kill switch: `"observe"` makes every guard and the processor of this process observe-only
    at once (nothing is denied; denials are recorded as would_block); `"enforce"` restores what
    each was configured with. OTEL_LOOPGUARD_KILL_SWITCH_FILE, when that file exists, wins."""
    from .killswitch import set_mode as _set_mode

    _set_mode(mode)


def reload_policy() -> list[str]:
    """Read the policy file again now, for the processor and every guard of this process (they
    also do when the file changes, within OTEL_LOOPGUARD_POLICY_RELOAD_SECONDS). Runs opened
    from now on are judged by it; open runs keep theirs. Returns the policy versions in use; an
    invalid file, or changed rules under a version already used, raises PolicyError and the
    policy in use stays everywhere (docs/policy.md, "Reloading")."""
    from .policy_source import reload_all

    return reload_all()


__all__ = ["__version__", "guard", "install", "record_termination", "reload_policy", "set_mode"]
