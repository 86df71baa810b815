"""`otel_loopguard.install()`: one line in the application's tracing setup.

It finds the global SDK TracerProvider (or creates one that exports over OTLP
per the standard OTEL_EXPORTER_OTLP_* settings), puts the loop guard in front of
the span processors it already has (and any added later), and returns a handle.
Calling it again returns the same handle.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Optional

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from .. import local_receivers
from ..errors import LoopguardError
from ..canon import load_key
from ..mode import note_installed
from ..policy_source import PolicySource
from .config import ProcessorConfig, resolve
from .sdk_shape import grpc_endpoint, route_span_processors, take_span_processors
from .span_processor import LoopguardSpanProcessor
from .tagger import Tagger

_log = logging.getLogger("otel_loopguard.processor")
_lock = threading.Lock()
_HANDLE_ATTR = "_otel_loopguard_handle"
_warned: set[tuple[str, str]] = set()  # (exporter endpoint, receiver listen): each said once


@dataclass(frozen=True)
class LoopguardHandle:
    mode: str
    key_id: str
    processor: LoopguardSpanProcessor
    provider: TracerProvider

    def shutdown(self) -> None:
        """Flush and stop; the provider's own shutdown does the same."""
        self.processor.shutdown()


def build_tagger(
    config: Optional[ProcessorConfig] = None,
    *,
    key: Optional[bytes | str] = None,
    key_file: Optional[str] = None,
) -> Tagger:
    config = config or resolve({})
    digest_key = load_key(key=key, key_file=key_file) if (key or key_file) else load_key()
    return Tagger(PolicySource(digest_key, config.policy, config.policy_reload_seconds), config)


def install(
    *,
    mode: Optional[str] = None,
    redact: Optional[bool] = None,
    policy: Optional[str | os.PathLike[str]] = None,
    run_id_attribute: Optional[str] = None,
    agent_scopes: Optional[bool] = None,
    key: Optional[bytes | str] = None,
    key_file: Optional[str] = None,
    tracer_provider: Optional[TracerProvider] = None,
) -> LoopguardHandle:
    """Add otel-loopguard to tracing. Arguments override OTEL_LOOPGUARD_* settings."""
    config = resolve(
        {"mode": mode, "redact": redact, "policy": policy, "run_id_attribute": run_id_attribute, "agent_scopes": agent_scopes}
    )
    with _lock:
        provider = tracer_provider or _global_provider()
        existing = getattr(provider, _HANDLE_ATTR, None)
        if existing is not None:
            return existing
        tagger = build_tagger(config, key=key, key_file=key_file)
        taken = take_span_processors(provider)
        if not taken:  # processors added later are handed tagged spans too; until then none leave
            _log.warning("otel-loopguard: the tracer provider has no span processor yet, so no exporter is "
                         "configured: tagged spans go nowhere until one is added (docs/processor.md)")
        _warn_if_around_a_receiver(taken)
        processor = LoopguardSpanProcessor(taken, tagger, config.queue_size)
        if mode is not None:  # guards without a mode of their own follow it (mode.py)
            processor.on_shutdown(note_installed(config.mode))
        _wrap_future_processors(provider, processor)
        handle = LoopguardHandle(mode=config.mode, key_id=tagger.key_id, processor=processor, provider=provider)
        setattr(provider, _HANDLE_ATTR, handle)
    _log.info("otel-loopguard installed: mode %s, key id %s", config.mode, tagger.key_id)
    return handle


def _warn_if_around_a_receiver(processors: list[SpanProcessor]) -> None:
    """Once per pair: an OTLP/gRPC exporter that sends to the very address a receiver on this
    machine forwards to bypasses that receiver (the spans are never judged), with no error."""
    endpoints = [e for e in map(grpc_endpoint, processors) if e]
    if not endpoints:
        return
    for note in local_receivers.running():
        forward, listen = note.get("forward"), note.get("listen")
        if not isinstance(forward, str) or not isinstance(listen, str):
            continue
        for endpoint in endpoints:
            if local_receivers.same_local_address(endpoint, forward) and (endpoint, listen) not in _warned:
                _warned.add((endpoint, listen))
                _log.warning(
                    "this app exports its spans to %s, where the otel-loopguard receiver listening on %s "
                    "(pid %s) forwards: they go around the receiver and no run is judged. Send them "
                    "through it: OTEL_EXPORTER_OTLP_ENDPOINT=http://%s", endpoint, listen, note.get("pid"), listen)


def _global_provider() -> TracerProvider:
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        return provider
    if type(provider).__name__ not in ("ProxyTracerProvider", "NoOpTracerProvider"):
        raise LoopguardError(
            f"the global tracer provider is a {type(provider).__name__}, not the OpenTelemetry SDK's "
            "TracerProvider; pass tracer_provider= to install()"
        )
    return _new_provider()


def _new_provider() -> TracerProvider:
    """No SDK provider yet: one that exports over OTLP/gRPC per OTEL_EXPORTER_OTLP_*."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def _wrap_future_processors(provider: TracerProvider, guard: LoopguardSpanProcessor) -> None:
    route_span_processors(provider, guard)

    def add_span_processor(span_processor: SpanProcessor) -> None:
        # Processors added after install() also receive tagged spans.
        guard.add_delegate(span_processor)

    provider.add_span_processor = add_span_processor  # type: ignore[method-assign]
