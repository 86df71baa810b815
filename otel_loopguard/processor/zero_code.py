"""Checks for the zero-code path (`opentelemetry-instrument`), run once after instrumenting.

Registered as an `opentelemetry_post_instrument` entry point: opentelemetry-instrument calls
it after the SDK is configured (by a distro's configurator) and every instrumentor ran. It
changes nothing; it warns, naming what to do, when
- no SDK tracer provider was set up (no distro installed: nothing is exported at all),
- the provider has no span processor (no exporter configured, e.g. OTEL_TRACES_EXPORTER=none),
- two instrumentations of one framework are both active (OpenInference's and OpenLLMetry's
  LangChain instrumentations both register the entry point `langchain`): every tool call is
  then traced twice. The processor counts such a pair once (tagger.py), but both trees of
  spans are exported and every model call is traced twice too.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Optional

_log = logging.getLogger("otel_loopguard.processor")
GROUP = "opentelemetry_instrumentor"


def post_instrument() -> None:
    """The entry point: log each problem found (never raises into the application)."""
    try:
        for problem in setup_problems():
            _log.warning("otel-loopguard: %s", problem)
    except Exception:  # a check must never break the application's start
        _log.exception("otel-loopguard: the zero-code setup check failed")


def setup_problems(provider: Any = None, entry_points: Optional[Iterable[Any]] = None) -> list[str]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = trace.get_tracer_provider() if provider is None else provider
    out = []
    if not isinstance(provider, TracerProvider):
        out.append("no OpenTelemetry SDK tracer provider is set up, so nothing is exported and no tool span is "
                   "tagged: opentelemetry-instrument sets up the SDK only with a distro "
                   "(pip install 'otel-loopguard[zero-code]', then OTEL_TRACES_EXPORTER=loopguard_otlp)")
    elif not _processors(provider):
        out.append("the tracer provider has no span processor, so no exporter is configured and nothing is "
                   "exported (OTEL_TRACES_EXPORTER=none?); set OTEL_TRACES_EXPORTER=loopguard_otlp")
    for name, active in active_duplicates(entry_points).items():
        out.append(f"two instrumentations of {name!r} are both active: {', '.join(active)}; every call is traced "
                   "twice (otel-loopguard counts a tool call once, but each model call is exported twice): "
                   "uninstall one of them")
    return out


def active_duplicates(entry_points: Optional[Iterable[Any]] = None) -> dict[str, list[str]]:
    """Entry point name -> the distributions whose instrumentors of it are both instrumenting."""
    if entry_points is None:
        from importlib.metadata import entry_points as find

        entry_points = find(group=GROUP)
    by_name: dict[str, list[str]] = {}
    for ep in entry_points:
        if _instrumenting(ep):
            dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value
            by_name.setdefault(ep.name, []).append(str(dist))
    return {name: sorted(dists) for name, dists in by_name.items() if len(dists) > 1}


def _instrumenting(ep: Any) -> bool:
    """Whether this entry point's instrumentor is active (BaseInstrumentor is a singleton per
    class, so a new instance is the one opentelemetry-instrument used)."""
    import sys

    module = ep.value.split(":", 1)[0]
    if module not in sys.modules:
        return False  # never loaded: not instrumenting
    try:
        cls = ep.load()
        return bool(getattr(cls(), "is_instrumented_by_opentelemetry", False))
    except Exception:
        return False


def _processors(provider: Any) -> tuple[Any, ...]:
    """The provider's span processors; behind install(), the ones the loop guard hands on to."""
    from .sdk_shape import span_processors
    from .span_processor import LoopguardSpanProcessor

    found = span_processors(provider)
    return tuple(d for p in found for d in (p.delegates if isinstance(p, LoopguardSpanProcessor) else (p,)))
