"""`otel_loopguard.install()`: one line in the application's tracing setup.

It finds the global SDK TracerProvider (or creates one that exports over OTLP
per the standard OTEL_EXPORTER_OTLP_* settings), puts the loop guard in front of
the span processors it already has (and any added later), and returns a handle.
Calling it again returns the same handle, unless it asks for other settings: that is an
error (a second call must not silently keep the first one's mode). `handle.shutdown()` takes
the loop guard out and gives the provider its processors back; install() then starts anew.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Optional

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from .. import local_receivers
from ..errors import LoopguardError
from ..canon import load_key
from ..mode import note_installed
from ..policy_source import PolicySource
from .config import ProcessorConfig, ProcessorConfigError, resolve
from .sdk_shape import grpc_endpoint, replace_span_processor, route_span_processors, take_span_processors
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
    # The arguments install() was given (None: not given), which a second install() must match.
    asked: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    config: ProcessorConfig = field(default_factory=ProcessorConfig, repr=False, compare=False)  # as resolved

    def shutdown(self) -> None:
        """Take otel-loopguard out of the provider: tag and hand on what it holds, stop its
        worker, flush the provider's processors and give them back (they go on exporting,
        untagged); guards stop following its mode. install() afterwards starts anew. The
        provider's own shutdown shuts everything down, exporters included."""
        with _lock:
            self.processor.detach()
            _give_back(self.provider, self.processor)
            if getattr(self.provider, _HANDLE_ATTR, None) is self:
                delattr(self.provider, _HANDLE_ATTR)


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
    mark_root: Optional[bool] = None,
    key: Optional[bytes | str] = None,
    key_file: Optional[str] = None,
    tracer_provider: Optional[TracerProvider] = None,
) -> LoopguardHandle:
    """Add otel-loopguard to tracing. Arguments override OTEL_LOOPGUARD_* settings.
    mark_root=False hands a stopped run's root span on as the application ended it (root.py)."""
    config = resolve({"mode": mode, "redact": redact, "policy": policy, "run_id_attribute": run_id_attribute,
                      "agent_scopes": agent_scopes, "mark_root": mark_root})
    asked = {"mode": mode, "redact": redact, "policy": None if policy is None else os.fspath(policy),
             "run_id_attribute": run_id_attribute, "agent_scopes": agent_scopes, "mark_root": mark_root}
    with _lock:
        provider = tracer_provider or _global_provider()
        existing = getattr(provider, _HANDLE_ATTR, None)
        if existing is not None and not existing.processor.stopped:
            _check_same(existing, asked, key, key_file)
            return existing
        tagger = build_tagger(config, key=key, key_file=key_file)
        taken = take_span_processors(provider)
        if existing is not None:  # the provider's shutdown stopped it: wrap what it wrapped
            stopped: LoopguardSpanProcessor = existing.processor
            taken = [q for p in taken for q in (stopped.delegates if p is stopped else (p,))]
        if not taken:  # processors added later are handed tagged spans too; until then none leave
            _log.warning("otel-loopguard: the tracer provider has no span processor yet, so no exporter is "
                         "configured: tagged spans go nowhere until one is added (docs/processor.md)")
        _warn_if_around_a_receiver(taken)
        processor = LoopguardSpanProcessor(taken, tagger, config.queue_size)
        if mode is not None:  # guards without a mode of their own follow it (mode.py)
            processor.on_shutdown(note_installed(config.mode))
        _wrap_future_processors(provider, processor)
        handle = LoopguardHandle(mode=config.mode, key_id=tagger.key_id, processor=processor, provider=provider,
                                 asked=asked, config=config)
        setattr(provider, _HANDLE_ATTR, handle)
    _log.info("otel-loopguard installed: mode %s, key id %s", config.mode, tagger.key_id)
    return handle


def _check_same(existing: LoopguardHandle, asked: dict[str, Any], key: Optional[bytes | str],
                key_file: Optional[str]) -> None:
    """A second install() on a provider that has one running: the same handle, unless this call
    asks for a setting the running one was not given. Then an error: keeping the first one's
    mode silently would leave guards enforcing after an install(mode="observe")."""
    installed = existing.config
    differ = []
    for name, value in asked.items():
        if value is None or (value == getattr(installed, name) and (name != "mode" or existing.asked.get("mode"))):
            continue
        differ.append(f"{name}={value!r} (installed: {getattr(installed, name)!r}"
                      f"{'' if name != 'mode' or existing.asked.get('mode') else ', not given to install()'})")
    if key or key_file:
        key_id = load_key(key=key, key_file=key_file).key_id
        if key_id != existing.key_id:
            differ.append(f"a key with key id {key_id} (installed: {existing.key_id})")
    if differ:
        raise ProcessorConfigError(
            "install(): otel-loopguard is already installed on this tracer provider, and this call asks for "
            f"{', '.join(differ)}; a second install() changes nothing. To stop enforcing at runtime call "
            "otel_loopguard.set_mode('observe'); to install with other settings, call shutdown() on the "
            "installed handle first (docs/processor.md)")


def _give_back(provider: TracerProvider, processor: LoopguardSpanProcessor) -> None:
    """The provider's span processors as they were before install() (and those added since)."""
    try:
        replace_span_processor(provider, processor, processor.delegates)
    except Exception:  # a provider of another shape: nothing of ours to take out
        _log.warning("otel-loopguard: could not give the tracer provider its span processors back")
    provider.__dict__.pop("add_span_processor", None)  # the SDK's own method again


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
