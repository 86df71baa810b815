"""The one module that reads the OpenTelemetry SDK's private fields; the rest of processor/ uses
its public API.

What is here is here for one of two reasons:
- speed, measured by bench/bench_processor.py (docs/performance.md, "The SDK's private
  fields"): `attributes_of`, the plain dict inside a span's BoundedAttributes, on the
  application's thread for every span; `copy_span`, a tagged copy of a ReadableSpan made
  from its fields, on the worker for every tool span;
- no public API for it: the provider's span processors (`take_span_processors`,
  `route_span_processors`, `span_processors`), the address an OTLP/gRPC exporter sends to
  (`grpc_endpoint`) and the processors' pre-end hook (`on_ending`).

`SHAPE_ERRORS` lists what the installed SDK lacks of what this module assumes, checked once at
import on real SDK objects. Each function still works when the shape differs (the public path,
or an error naming what to do instead), a warning says so once, and
tests/processor/test_sdk_shape.py fails on any entry: an SDK upgrade that changes the shape
is a failing test, not a silent slowdown.
"""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import Any, Mapping, Optional, Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Status

from ..errors import LoopguardError

_log = logging.getLogger("otel_loopguard.processor")
_NO_ATTRIBUTES: Mapping[str, Any] = MappingProxyType({})


# -- speed: attributes on the application's thread -----------------------------------------------


def attributes_of(span: Any) -> Mapping[str, Any]:
    """The span's attributes, for reading only (it is the span's own storage).

    `span.attributes` builds a MappingProxyType around the SDK's BoundedAttributes on each
    read, and both answer `keys()`, `in` and `get` through the Mapping ABC in Python; the plain
    dict inside answers in C. Any other span (one built with a plain mapping, such as the
    tagged copies below) is read through its public attributes."""
    try:
        return span._attributes._dict  # type: ignore[no-any-return]  # noqa: SLF001
    except AttributeError:
        return span.attributes or _NO_ATTRIBUTES


# -- speed: the tagged copy on the worker ---------------------------------------------------------


def copy_span(span: ReadableSpan, attributes: Any, events: Optional[Any] = None,
              status: Optional[Status] = None) -> ReadableSpan:
    """A copy of a finished span with other attributes and, unless None, other events and status.

    What the SDK hands processors is copied field by field (a third of the constructor's cost
    with its property reads); any other span, and any copy with another status (one root span
    per stopped run: no speed to gain), goes through the public constructor, keeping the
    dropped counts of its events and links."""
    if status is None and type(span) is ReadableSpan and len(span.__dict__) == _READABLE_FIELD_COUNT:
        copy = ReadableSpan.__new__(ReadableSpan)
        fields = copy.__dict__
        fields.update(span.__dict__)
        fields["_attributes"] = attributes
        if events is not None:
            fields["_events"] = events
        fields["_instrumentation_info"] = None  # as the constructor below leaves it
        return copy
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=_bounded_list(span.events, span.dropped_events) if events is None else events,
        links=_bounded_list(span.links, span.dropped_links),
        kind=span.kind,
        status=span.status if status is None else status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _bounded_list(items: Any, dropped: int) -> Any:
    """The items, as the SDK's BoundedList when some were dropped (the count is exported)."""
    if not dropped:
        return items
    out: Any = BoundedList(None)
    out.extend(items)
    out.dropped = dropped
    return out


# -- no public API: the provider's processors, an exporter's address, the pre-end hook ------------


def _multi(provider: TracerProvider) -> Any:
    multi = getattr(provider, "_active_span_processor", None)
    if multi is None or not hasattr(multi, "_span_processors") or not hasattr(multi, "_lock"):
        raise LoopguardError("this TracerProvider does not expose its span processors; add "
                             "LoopguardSpanProcessor yourself around your exporter's processor")
    return multi


def take_span_processors(provider: TracerProvider) -> list[SpanProcessor]:
    """Remove the provider's span processors and return them (the SDK can only add one)."""
    multi = _multi(provider)
    with multi._lock:  # noqa: SLF001
        taken = list(multi._span_processors)  # noqa: SLF001
        multi._span_processors = ()  # noqa: SLF001
    return taken


def route_span_processors(provider: TracerProvider, only: SpanProcessor) -> None:
    """Make `only` the provider's one span processor."""
    multi = _multi(provider)
    with multi._lock:  # noqa: SLF001
        multi._span_processors = (only,)  # noqa: SLF001


def replace_span_processor(provider: TracerProvider, ours: SpanProcessor, by: Sequence[SpanProcessor]) -> None:
    """Put `by` where `ours` is among the provider's span processors (none when it is not)."""
    multi = _multi(provider)
    with multi._lock:  # noqa: SLF001
        current = multi._span_processors  # noqa: SLF001
        if ours in current:
            multi._span_processors = tuple(q for p in current for q in (by if p is ours else (p,)))  # noqa: SLF001


def span_processors(provider: Any) -> tuple[Any, ...]:
    """The provider's span processors; () when it does not expose them."""
    multi = getattr(provider, "_active_span_processor", None)
    return tuple(getattr(multi, "_span_processors", ()) or ())


def grpc_endpoint(processor: SpanProcessor) -> Optional[str]:
    """The address an SDK span processor's OTLP/gRPC exporter sends to (Batch or Simple)."""
    exporter = getattr(processor, "span_exporter", None)  # public on both (the Batch one for compatibility)
    if type(exporter).__module__ != "opentelemetry.exporter.otlp.proto.grpc.trace_exporter":
        return None  # OTLP/HTTP goes to another port than a receiver's (gRPC) forward; others unknown
    endpoint = getattr(exporter, "_endpoint", None)
    return endpoint if isinstance(endpoint, str) else None


def on_ending(processor: SpanProcessor, span: Any) -> None:
    """The SDK's pre-end hook (`SpanProcessor._on_ending`, called before a span is finished),
    passed on to a wrapped processor."""
    hook = getattr(processor, "_on_ending", None)
    if hook is not None:
        hook(span)


# -- the shape, checked once --------------------------------------------------------------------


def _shape_errors() -> list[str]:
    """What the installed SDK lacks of what the functions above read, found on real objects."""
    errors = []
    provider = TracerProvider(sampler=ALWAYS_ON, resource=Resource.get_empty(), shutdown_on_exit=False)
    multi = getattr(provider, "_active_span_processor", None)
    if not isinstance(multi, SynchronousMultiSpanProcessor):
        errors.append("TracerProvider._active_span_processor is not a SynchronousMultiSpanProcessor")
    elif not isinstance(getattr(multi, "_span_processors", None), tuple) or not hasattr(multi, "_lock"):
        errors.append("SynchronousMultiSpanProcessor has no _span_processors tuple and _lock")
    span = provider.get_tracer("otel_loopguard.sdk_shape").start_span("shape", attributes={"k": 1})
    if isinstance(span, Span):  # else OTEL_SDK_DISABLED: no SDK span to read
        plain = getattr(getattr(span, "_attributes", None), "_dict", None)
        span.set_attribute("later", 2)  # the dict must be the span's live storage, not a copy
        if type(plain) is not dict or plain != dict(span.attributes or {}) or "later" not in plain:
            errors.append("a span's attributes are not a BoundedAttributes over a plain dict (_attributes._dict)")
        span.end()
    if not callable(getattr(SpanProcessor, "_on_ending", None)):
        errors.append("SpanProcessor has no _on_ending hook")
    fields = ReadableSpan("fields", resource=Resource.get_empty()).__dict__
    if not {"_attributes", "_events", "_instrumentation_info"} <= fields.keys():
        errors.append("ReadableSpan keeps no _attributes, _events and _instrumentation_info fields")
    return errors


# How many fields ReadableSpan.__init__ sets: the field copy is exact only when a span has no
# other (a count, not a key-by-key comparison: the SDK only ever sets these, in __init__).
_READABLE_FIELD_COUNT = len(ReadableSpan("fields", resource=Resource.get_empty()).__dict__)
SHAPE_ERRORS: list[str] = _shape_errors()
if SHAPE_ERRORS:
    _log.warning("otel-loopguard: this OpenTelemetry SDK differs from the one it was built against (%s); the "
                 "processor works but may be slower or unable to install itself: please report it",
                 "; ".join(SHAPE_ERRORS))
