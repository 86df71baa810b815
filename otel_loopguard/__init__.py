"""otel-loopguard: catch AI agents stuck in tool-call loops, from OpenTelemetry spans.

The pure core (fingerprint, policy, progress, detect, findings, score,
conventions) imports nothing from gRPC or the OpenTelemetry SDK; the audit CLI
is a thin shell around it. See docs/architecture.md.
"""

from __future__ import annotations

__version__ = "0.1.0"


def install(**kwargs: object) -> "object":
    """Add otel-loopguard to the application's tracing (see otel_loopguard.processor.install)."""
    from .processor import install as _install  # the SDK is imported only when installing

    return _install(**kwargs)  # type: ignore[arg-type]


__all__ = ["__version__", "install"]
