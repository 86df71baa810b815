"""Fuzzing the receiver's decode: generated requests with odd attribute types, and mutated bytes.

Shared by tests/reliability/test_fuzz_decode.py (tens of thousands of cases in CI) and
bench/fuzz_decode.py (millions). One case is a byte string, and `Pipeline.check` holds the
receiver's promises for it:
- bytes that are not a request are refused with DecodeError or RuntimeError and a message;
  a request over max_request_spans with TooManySpans; nothing else is ever raised;
- of an accepted request every span is accounted for (decoded, or rejected with a reason),
  once each; the spans the service would forward re-encode to exactly those spans;
- deduplication, run assembly, judging and the finding spans run as the service runs them,
  and log no traceback (a span that cannot be judged is logged with one: that is a failure).
"""

from __future__ import annotations

import logging
import random
from typing import Any, Optional

from google.protobuf.message import DecodeError
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from otel_loopguard.conventions import attributes as conv
from otel_loopguard.conventions.spec import MODEL_CONVENTIONS, TOOL_CONVENTIONS
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.policy import Policy
from otel_loopguard.receiver.runs.assembly import RunAssembler
from otel_loopguard.receiver.config import ReceiverConfig
from otel_loopguard.receiver.ingest.decode import TooManySpans
from otel_loopguard.receiver.ingest.dedupe import DUPLICATE, NEW, SpanDeduper
from otel_loopguard.receiver.ops.metrics import Metrics
from otel_loopguard.receiver.front.service import parse_request

MAX_SPANS = 64
RUN_ATTRIBUTE = "gen_ai.conversation.id"

# Keys the decode reads (markers, the conventions' fields, the processor's tags), so generated
# spans reach every reading path; plus keys it ignores.
KEYS = sorted({
    *(k for c in TOOL_CONVENTIONS for k in (c.marker, c.tool, *c.call_id, *c.arguments, *c.result)),
    *(k for c in MODEL_CONVENTIONS for k in (c.marker, *c.model, *c.input_tokens, *c.output_tokens)),
    conv.TOOL_NAME, conv.ARGS_DIGEST, conv.RESULT_DIGEST, conv.RESULT_EXACT_DIGEST, conv.SEQ, conv.SEQ_DENSE,
    conv.RUN_ID, conv.TURN, conv.OUTCOME, conv.KEY_ID, conv.MODE, conv.TERMINATION_REASON, conv.TERMINAL_RESPONSE,
    conv.GUARD, conv.DISPATCHED, conv.DUPLICATE_OF, RUN_ATTRIBUTE, "loopguard.decision", "loopguard.finding.kind",
    "error.type", "http.method", "",
})
MARKER_VALUES = sorted({v for c in (*TOOL_CONVENTIONS, *MODEL_CONVENTIONS) for v in c.marker_values})
NAMES = ["execute_tool lookup_order", "chat gpt-x", "invoke_agent", "loopguard.finding", "loopguard.run scored",
         "transfer_to_billing", "POST", ""]
TRACES = [bytes([n]) * 16 for n in range(1, 4)]
SPAN_IDS = [bytes([n]) * 8 for n in range(1, 6)]


# -- generated requests -------------------------------------------------------------
_text = st.one_of(st.sampled_from(MARKER_VALUES + NAMES + ["", "A12", "{\"q\": 1}", "1", "-1", "true"]),
                  st.text(max_size=12))
_scalar = st.one_of(
    _text.map(lambda v: AnyValue(string_value=v)),
    st.booleans().map(lambda v: AnyValue(bool_value=v)),
    st.integers(-(2**63), 2**63 - 1).map(lambda v: AnyValue(int_value=v)),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda v: AnyValue(double_value=v)),
    st.binary(max_size=8).map(lambda v: AnyValue(bytes_value=v)),
    st.just(AnyValue()),  # no value set at all
)
_key = st.one_of(st.sampled_from(KEYS), st.text(max_size=8))
any_values = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(lambda vs: AnyValue(array_value=ArrayValue(values=vs))),
    st.lists(st.tuples(_key, inner), max_size=3).map(
        lambda kvs: AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key=k, value=v) for k, v in kvs])))),
    max_leaves=4)
key_values = st.lists(st.tuples(_key, any_values), max_size=5).map(
    lambda kvs: [KeyValue(key=k, value=v) for k, v in kvs])
_ids16 = st.one_of(st.sampled_from(TRACES), st.binary(min_size=16, max_size=16), st.binary(max_size=17))
_ids8 = st.one_of(st.sampled_from(SPAN_IDS), st.binary(max_size=9))
_times = st.integers(0, 2**64 - 1)
_events = st.lists(st.builds(Span.Event, name=st.sampled_from(["loopguard.decision", "exception", ""]),
                             time_unix_nano=_times, attributes=key_values), max_size=2)


@st.composite
def spans(draw: Any) -> Span:
    span = Span(trace_id=draw(_ids16), span_id=draw(_ids8), parent_span_id=draw(st.one_of(st.just(b""), _ids8)),
                name=draw(st.one_of(st.sampled_from(NAMES), st.text(max_size=8))),
                start_time_unix_nano=draw(_times), end_time_unix_nano=draw(_times),
                attributes=draw(key_values), events=draw(_events),
                status=Status(code=draw(st.integers(0, 2**31 - 1)), message=draw(st.text(max_size=4))))
    return span


requests = st.lists(
    st.tuples(key_values, st.lists(st.tuples(key_values, st.lists(spans(), max_size=4)), max_size=2)),
    max_size=2,
).map(lambda rss: ExportTraceServiceRequest(resource_spans=[
    ResourceSpans(resource=Resource(attributes=res), scope_spans=[
        ScopeSpans(scope=InstrumentationScope(name="s", attributes=scope_attrs), spans=ss) for scope_attrs, ss in scopes])
    for res, scopes in rss]).SerializeToString())


# -- the same shapes from a seed: a thousand times faster to make than by strategy ------
def _random_value(rnd: random.Random, depth: int = 0) -> AnyValue:
    kind = rnd.randrange(9 if depth < 3 else 7)
    if kind == 0:
        return AnyValue(string_value=rnd.choice(MARKER_VALUES + NAMES + ["", "A12", "1", "\x00", "\ud7ff\u0301"]))
    if kind == 1:
        return AnyValue(bool_value=rnd.random() < 0.5)
    if kind == 2:
        return AnyValue(int_value=rnd.choice((0, 1, -1, 2**63 - 1, -(2**63), rnd.randrange(-1000, 1000))))
    if kind == 3:
        return AnyValue(double_value=rnd.choice((0.0, -0.0, 1.5, float("nan"), float("inf"), -float("inf"), 1e308)))
    if kind == 4:
        return AnyValue(bytes_value=rnd.randbytes(rnd.randrange(9)))
    if kind == 5:
        return AnyValue()
    if kind == 6:
        return AnyValue(string_value=rnd.randbytes(rnd.randrange(12)).decode("latin-1"))
    if kind == 7:
        return AnyValue(array_value=ArrayValue(values=[_random_value(rnd, depth + 1) for _ in range(rnd.randrange(4))]))
    return AnyValue(kvlist_value=KeyValueList(values=_random_attributes(rnd, depth + 1)))


def _random_attributes(rnd: random.Random, depth: int = 0) -> list[KeyValue]:
    return [KeyValue(key=rnd.choice(KEYS) if rnd.random() < 0.8 else rnd.randbytes(4).decode("latin-1"),
                     value=_random_value(rnd, depth)) for _ in range(rnd.randrange(8))]


def _random_id(rnd: random.Random, pool: list[bytes], size: int) -> bytes:
    roll = rnd.random()
    return rnd.choice(pool) if roll < 0.7 else rnd.randbytes(size) if roll < 0.9 else rnd.randbytes(rnd.randrange(size + 2))


def random_request(rnd: random.Random) -> bytes:
    """A request of odd but well-formed protobuf: ids of every length, values of every type
    under the keys the decode reads, times out of order, decision events, unknown status codes."""
    def span() -> Span:
        events = [Span.Event(name=rnd.choice(("loopguard.decision", "exception")), time_unix_nano=rnd.randrange(2**64),
                             attributes=_random_attributes(rnd)) for _ in range(rnd.randrange(3))]
        return Span(trace_id=_random_id(rnd, TRACES, 16), span_id=_random_id(rnd, SPAN_IDS, 8),
                    parent_span_id=b"" if rnd.random() < 0.3 else _random_id(rnd, SPAN_IDS, 8),
                    name=rnd.choice(NAMES), start_time_unix_nano=rnd.randrange(2**64),
                    end_time_unix_nano=rnd.randrange(2**64), attributes=_random_attributes(rnd), events=events,
                    status=Status(code=rnd.choice((0, 1, 2, 3, 2**31 - 1))))
    request = ExportTraceServiceRequest(resource_spans=[
        ResourceSpans(resource=Resource(attributes=_random_attributes(rnd)), scope_spans=[
            ScopeSpans(scope=InstrumentationScope(name="s"), spans=[span() for _ in range(rnd.randrange(8))])
            for _ in range(rnd.randrange(1, 3))])
        for _ in range(rnd.randrange(1, 3))])
    return request.SerializeToString()


# -- mutated bytes ------------------------------------------------------------------
def mutate(data: bytes, rnd: random.Random) -> bytes:
    """A few byte-level edits of the kinds that break protobuf framing or content."""
    out = bytearray(data)
    for _ in range(rnd.randint(1, 2)):
        where = rnd.randrange(len(out) + 1)
        kind = rnd.randrange(11)
        if kind == 0 and out:  # flip a bit
            out[min(where, len(out) - 1)] ^= 1 << rnd.randrange(8)
        elif kind == 1:  # insert random bytes
            out[where:where] = rnd.randbytes(rnd.randint(1, 4))
        elif kind == 2 and out:  # delete a run
            del out[where:where + rnd.randint(1, 8)]
        elif kind == 3 and out:  # a byte set to a boundary value (lengths, varints, tags)
            out[min(where, len(out) - 1)] = rnd.choice((0x00, 0x01, 0x7F, 0x80, 0xFF))
        elif kind == 4:  # duplicate a slice (repeated fields, overlong messages)
            cut = out[where:where + rnd.randint(1, 32)]
            out[where:where] = cut
        elif kind == 5:  # truncate
            del out[where:]
        elif out:  # most often: a byte of content changed (ids, times, text): still a request
            out[min(where, len(out) - 1)] = rnd.randrange(0x20, 0x7F)
    return bytes(out)


class _Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


class Pipeline:
    """The receiver's steps after the wire, with the real classes: dedupe, assemble, judge."""

    def __init__(self, run_attribute: Optional[str] = RUN_ATTRIBUTE):
        self.metrics = Metrics()
        config = ReceiverConfig(forward="127.0.0.1:1", run_id_attribute=run_attribute, memory_limit_mib=128)
        self.assembler = RunAssembler(Fingerprinter(load_key(key=b"fuzz-key-0123456789abcdef"), Policy()),
                                      config, self.metrics)
        self.deduper = SpanDeduper(100_000, 600)
        self.run_attribute = run_attribute
        self.outcomes: dict[str, int] = {}
        self.tracebacks = _Tracebacks()
        logger = logging.getLogger("otel_loopguard")
        logger.addHandler(self.tracebacks)
        self._logger = logger
        self._level = logger.level
        logger.setLevel(logging.ERROR)  # findings are logged at WARNING: millions of lines otherwise

    def close(self) -> None:
        self._logger.removeHandler(self.tracebacks)
        self._logger.setLevel(self._level)

    def check(self, data: bytes) -> str:
        outcome = self._check(data)
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        assert not self.tracebacks.records, f"a traceback was logged for {data!r}: {self.tracebacks.records[0].getMessage()}"
        assert not self.metrics.get("internal_errors_total"), f"an internal error for {data!r}"
        return outcome

    def _check(self, data: bytes) -> str:
        try:
            decoded = parse_request(data, self.run_attribute, MAX_SPANS)
        except TooManySpans as exc:
            assert "max_request_spans" in str(exc)
            return "too_many_spans"
        except (DecodeError, RuntimeError) as exc:
            assert str(exc), "a refusal without a message"
            return "refused"
        full = ExportTraceServiceRequest.FromString(data)  # what the lite schema took, the full one takes
        count = sum(len(ss.spans) for rs in full.resource_spans for ss in rs.scope_spans)
        seen = [d.where for d in decoded.spans] + [w for w, _ in decoded.rejected]
        assert len(seen) == count == len(set(seen)), "a span was lost or counted twice"
        assert all(why for _, why in decoded.rejected), "a span rejected without a reason"
        self._judge(data, decoded)
        return "accepted"

    def _judge(self, data: bytes, decoded: Any) -> None:
        """As the service's steps 3 and 5 do (service.py), without the wire."""
        from otel_loopguard.receiver.front.service import _filtered_bytes  # the service's own re-encoding

        fresh, dropped, in_request = [], [], {}
        for d in decoded.spans:
            verdict = self.deduper.check(d.key, d.content)
            if verdict == NEW and d.key in in_request:
                verdict = DUPLICATE if in_request[d.key] == d.content else "conflict"
            if verdict == NEW:
                in_request[d.key] = d.content
                fresh.append(d)
            else:
                dropped.append((d, verdict))
        if dropped or decoded.rejected:
            kept = ExportTraceServiceRequest.FromString(_filtered_bytes(data, fresh))
            assert sum(len(ss.spans) for rs in kept.resource_spans for ss in rs.scope_spans) == len(fresh)
        self.deduper.remember_all((d.key, d.content) for d in fresh)
        out = self.assembler.accept(fresh)
        for d, verdict in dropped:
            out += self.assembler.duplicate(d) if verdict == DUPLICATE else self.assembler.conflict(d)
        out += self.assembler.tick()
        for span in out:
            span.SerializeToString()  # every finding span is a valid span

    def finish(self) -> None:
        for span in self.assembler.flush():
            span.SerializeToString()
        assert not self.tracebacks.records, self.tracebacks.records[0].getMessage()


def corpus() -> list[bytes]:
    """Well-formed requests to mutate: an agent run's spans as instrumentations write them."""
    rnd = random.Random(7)
    out = []
    for n in range(8):
        spans_ = []
        for i in range(1, 7):
            attrs = [KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="execute_tool")),
                     KeyValue(key="gen_ai.tool.name", value=AnyValue(string_value="lookup_order")),
                     KeyValue(key="gen_ai.tool.call.arguments", value=AnyValue(string_value='{"order_id": "A12"}')),
                     KeyValue(key=conv.SEQ, value=AnyValue(int_value=i)),
                     KeyValue(key=RUN_ATTRIBUTE, value=AnyValue(string_value=f"conv-{n}"))]
            spans_.append(Span(trace_id=rnd.randbytes(16), span_id=rnd.randbytes(8), parent_span_id=rnd.randbytes(8),
                               name="execute_tool lookup_order", start_time_unix_nano=10 * i,
                               end_time_unix_nano=10 * i + 5, attributes=attrs))
        request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans_)])])
        out.append(request.SerializeToString())
    return out
