"""otel-loopguard: catch AI agents stuck in tool-call loops, from OpenTelemetry spans.

The pure core (fingerprint, policy, progress, detect, findings, score,
conventions) imports nothing from gRPC or the OpenTelemetry SDK; the audit CLI
is a thin shell around it. See docs/architecture.md.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
