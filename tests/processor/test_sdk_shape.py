"""The SDK's private shape that processor/sdk_shape.py reads is the installed SDK's shape.

These fail loudly when an OpenTelemetry SDK upgrade moves a field: the processor would
otherwise keep working on its public fallbacks, slower, or refuse to install, and nobody
would notice until a benchmark or a user did. And no other module of processor/ reads a
private field of the SDK (or of any other library).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link

from otel_loopguard.processor import sdk_shape

PROCESSOR = Path(sdk_shape.__file__).parent


def test_the_installed_sdk_has_the_shape_the_module_reads() -> None:
    assert sdk_shape.SHAPE_ERRORS == []


def test_attributes_of_a_live_span_is_its_own_storage_and_public_for_others() -> None:
    span = TracerProvider().get_tracer("t").start_span("s", attributes={"a": 1})
    plain = sdk_shape.attributes_of(span)
    assert type(plain) is dict  # the dict inside, not the Mapping-ABC view
    span.set_attribute("b", 2)
    assert plain == {"a": 1, "b": 2} == dict(span.attributes or {})  # live: read at on_start and on_end
    span.end()
    other = ReadableSpan("copy", attributes={"x": 1})  # a plain mapping: read through the public view
    assert dict(sdk_shape.attributes_of(other)) == {"x": 1}
    assert dict(sdk_shape.attributes_of(ReadableSpan("bare"))) == {}


def _finished_span() -> ReadableSpan:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("linked") as linked:
        pass
    span = tracer.start_span("s", attributes={"a": 1}, links=[Link(linked.get_span_context(), {"l": 1})])
    span.add_event("e", {"k": 1})
    span.end()
    return exporter.get_finished_spans()[-1]


class Subclass(ReadableSpan):
    pass


def _as_subclass(span: ReadableSpan) -> ReadableSpan:
    other = Subclass.__new__(Subclass)
    other.__dict__.update(span.__dict__)
    return other


def test_the_field_copy_equals_the_public_constructor() -> None:
    span = _finished_span()
    assert type(span) is ReadableSpan and len(span.__dict__) == sdk_shape._READABLE_FIELD_COUNT  # noqa: SLF001
    fast = sdk_shape.copy_span(span, {"b": 2})
    slow = sdk_shape.copy_span(_as_subclass(span), {"b": 2})  # not the exact type: the constructor
    assert fast.to_json() == slow.to_json()
    assert fast.__dict__.keys() == slow.__dict__.keys()
    assert dict(fast.attributes or {}) == {"b": 2} and dict(span.attributes or {}) == {"a": 1}
    assert [e.name for e in fast.events] == ["e"] and len(fast.links) == 1
    events = BoundedList.from_seq(None, [*span.events, *span.events])
    assert [e.name for e in sdk_shape.copy_span(span, {}, events).events] == ["e", "e"]


def test_dropped_events_and_links_stay_counted_on_either_path() -> None:
    span = _finished_span()
    span._events.dropped = 3  # noqa: SLF001 - as the SDK counts events over its limit
    span._links.dropped = 2  # noqa: SLF001
    for source in (span, _as_subclass(span)):
        copy = sdk_shape.copy_span(source, {})
        assert (copy.dropped_events, copy.dropped_links) == (3, 2), type(source)


def test_the_provider_processors_can_be_taken_and_routed() -> None:
    provider = TracerProvider()
    first, second = BatchSpanProcessor(InMemorySpanExporter()), SimpleSpanProcessor(InMemorySpanExporter())
    provider.add_span_processor(first)
    provider.add_span_processor(second)
    assert sdk_shape.span_processors(provider) == (first, second)
    assert sdk_shape.take_span_processors(provider) == [first, second]
    assert sdk_shape.span_processors(provider) == ()
    only = SpanProcessor()
    sdk_shape.route_span_processors(provider, only)
    assert sdk_shape.span_processors(provider) == (only,)
    provider.shutdown()


def test_the_grpc_exporter_address_is_found_behind_batch_and_simple_processors() -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint="http://127.0.0.1:4999", insecure=True)
    try:
        assert sdk_shape.grpc_endpoint(BatchSpanProcessor(exporter)) is not None
        assert "4999" in (sdk_shape.grpc_endpoint(SimpleSpanProcessor(exporter)) or "")
        assert sdk_shape.grpc_endpoint(SimpleSpanProcessor(InMemorySpanExporter())) is None  # negative control
    finally:
        exporter.shutdown()


def test_the_pre_end_hook_reaches_a_wrapped_processor() -> None:
    seen: list[str] = []

    class Hooked(SpanProcessor):
        def _on_ending(self, span: object) -> None:
            seen.append("ending")

    sdk_shape.on_ending(Hooked(), object())
    sdk_shape.on_ending(SpanProcessor(), object())  # the base's no-op
    assert seen == ["ending"]


# -- nothing else in processor/ reads a private field of another library ------------------------

_OWN = {"self", "cls", "state", "stack"}  # names whose private fields are this package's own


def _private_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            if isinstance(base, ast.Name) and (base.id in _OWN or base.id.startswith("_")):
                continue  # self._x, or a private module-level name of our own
            out.append(f"{path.name}:{node.lineno} .{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("_") \
                and not node.value.startswith("__") and node.value.isidentifier():
            out.append(f"{path.name}:{node.lineno} {node.value!r}")  # getattr(x, "_field")
    return out


@pytest.mark.parametrize("path", sorted(p for p in PROCESSOR.glob("*.py") if p.name != "sdk_shape.py"),
                         ids=lambda p: p.name)
def test_no_other_processor_module_reads_a_private_field(path: Path) -> None:
    allowed = {"install.py": {"'_otel_loopguard_handle'"}}  # our own marker on the provider
    found = [hit for hit in _private_reads(path) if hit.split(" ", 1)[1] not in allowed.get(path.name, set())]
    assert found == []


def test_the_private_read_scan_sees_one(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("x = span._attributes._dict\ny = getattr(p, '_exporter', None)\nz = self._ok\n",
                     encoding="utf-8")
    assert _private_reads(probe) == ["probe.py:1 ._dict", "probe.py:1 ._attributes", "probe.py:2 '_exporter'"]
