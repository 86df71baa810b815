"""Sharding by trace id, proven on real receivers: N replicas judge exactly like one.

collector_config/sharded.yaml puts the Collector's load-balancing exporter
(`routing_key: traceID`) in front of several `otel-loopguard serve --findings-only` replicas.
Here two real receivers (ReceiverThread, each with its own downstream Sink) are given disjoint
sets of traces, split the way that exporter splits: each request is cut by trace id and every
trace goes to the replica its id hashes to. We use sha256(trace id) mod 2; the exporter uses a
consistent-hash ring instead, but all that matters for the proof is that the choice is a
function of the trace id alone, so every span of a trace lands on the same replica.

Together they must emit exactly the finding spans (and run summaries) one receiver emits for
all traces: same trace, parent, times, attributes (kind, severity, seq range, count, span ids,
reason, ...), links and events. The corpus mixes looping and healthy runs, processor-tagged
spans (TaggedRun) and untagged spans from the real SDK (tests/receiver/agent.py).

The documented limit is a test too: a run that spans two traces (one `loopguard.run.id`) split
across replicas by trace id is NOT judged like one receiver judges it; routed by the run id
(collector_config/sharded-by-conversation.yaml, `routing_key: attributes`) it is.
"""

from __future__ import annotations

import hashlib
import random
import time
from typing import Any, Callable, Iterable, Iterator, Sequence

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from receiver.agent import HEALTHY, LOOP, encode, run_agent
from receiver.harness import FINDING, RUN, ReceiverThread, Sink, TaggedRun, export_stub, make_config, request_of, wait_for

REPLICAS = 2
KEY = "sharding-test-key-0123456789"  # one digest key for every replica, as in production


@pytest.fixture(autouse=True)
def _digest_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)


def replica_of(trace_id: bytes, n: int = REPLICAS) -> int:
    """Stand-in for the exporter's ring: any function of the trace id alone will do."""
    return int.from_bytes(hashlib.sha256(trace_id).digest()[:8], "big") % n


# -- the corpus ------------------------------------------------------------------------------


class SeededIds(IdGenerator):
    """Deterministic trace and span ids, so the split is the same on every run of the test."""

    def __init__(self, seed: int):
        self._rnd = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._rnd.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rnd.getrandbits(128) or 1


def sdk_run(calls: list[tuple[str, dict[str, Any], Any]], seed: int, fail: frozenset[int] = frozenset()) -> list[Any]:
    """One agent trace from the real SDK (agent.run_agent), spans in the order they finished."""
    exporter = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": "scripted-agent"}), id_generator=SeededIds(seed))
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    run_agent(tp, calls, fail=fail)
    tp.shutdown()
    return list(exporter.get_finished_spans())


def tagged_run(seed: int, args: Sequence[str], results: Sequence[str]) -> list[Any]:
    """A processor-tagged run: one call per (args, result), then its root span (ends the run)."""
    run = TaggedRun(seed=seed)
    return [run.call(seq, args=a, result=r) for seq, (a, r) in enumerate(zip(args, results), start=1)] + [run.root()]


def hexes(*values: int) -> list[str]:
    return [f"{v:032x}" for v in values]


ERRORING = [("charge_card", {"order_id": "A12", "amount": 10}, {"error": "card declined"})] * 5
POLL = [("lookup_order", {"order_id": "B7"}, {"status": "pending"})] * 4 + [
    ("lookup_order", {"order_id": "B8"}, {"status": "delivered", "order_id": "B8"})]


def corpus() -> list[list[Any]]:
    """Each item: the spans of one trace (one run), in the order the app would export them."""
    runs: list[list[Any]] = []
    # processor-tagged: same action again and again (repeat, no_progress) ...
    for seed in (101, 102, 103):
        runs.append(tagged_run(seed, hexes(*[1] * 6), hexes(*[2] * 6)))
    # ... a 2-cycle with the same results (cycle) ...
    for seed in (111, 112):
        runs.append(tagged_run(seed, hexes(*[3, 4] * 4), hexes(*[5, 6] * 4)))
    # ... and healthy runs: every call new, every result new.
    for seed in (121, 122, 123):
        runs.append(tagged_run(seed, hexes(*range(10, 16)), hexes(*range(20, 26))))
    # untagged, from the real SDK: loops, failing loops, healthy runs, a poll that ends.
    for seed in (201, 202):
        runs.append(sdk_run(LOOP, seed))
    runs.append(sdk_run(ERRORING, 211, fail=frozenset(range(1, 6))))
    for seed in (221, 222):
        runs.append(sdk_run(HEALTHY, seed))
    runs.append(sdk_run(POLL, 231))
    return runs


def trace_of(span: Any) -> bytes:
    return span.trace_id if isinstance(span, PbSpan) else span.context.trace_id.to_bytes(16, "big")


def build_request(spans: Iterable[Any]) -> ExportTraceServiceRequest:
    """Hand-made protobuf spans and SDK spans in one request, each with its own resource."""
    spans = list(spans)
    request = ExportTraceServiceRequest()
    sdk = [s for s in spans if not isinstance(s, PbSpan)]
    tagged = [s for s in spans if isinstance(s, PbSpan)]
    if sdk:
        request.resource_spans.extend(encode(sdk).resource_spans)
    if tagged:
        request.resource_spans.extend(request_of(tagged).resource_spans)
    return request


def batches(runs: list[list[Any]], size: int = 7) -> list[list[Any]]:
    """What a batch processor hands the exporter: traces interleaved, several per request,
    each trace's own spans in order (root last)."""
    queues = [list(r) for r in runs]
    mixed: list[Any] = []
    while any(queues):
        for q in queues:
            if q:
                mixed.append(q.pop(0))
    return [mixed[i:i + size] for i in range(0, len(mixed), size)]


def split(batch: list[Any], route: Callable[[Any], int], n: int = REPLICAS) -> list[list[Any]]:
    """The load-balancing exporter's cut: one request per replica, by the routing key."""
    parts: list[list[Any]] = [[] for _ in range(n)]
    for span in batch:
        parts[route(span)].append(span)
    return parts


# -- running receivers -----------------------------------------------------------------------


class Replica:
    """One `otel-loopguard serve --findings-only` with its own downstream sink."""

    def __init__(self, **overrides: Any):
        self.sink = Sink()
        self.receiver = ReceiverThread(make_config(self.sink.port, findings_only=True, **overrides))
        self.channel, self.stub = export_stub(self.receiver.port)

    def send(self, spans: list[Any]) -> None:
        if spans:
            self.stub.Export(build_request(spans), timeout=10)

    def close(self) -> None:
        self.channel.close()
        try:
            self.receiver.stop()
        finally:
            self.sink.stop()


@pytest.fixture
def replicas() -> Iterator[Callable[..., Replica]]:
    made: list[Replica] = []

    def make(**overrides: Any) -> Replica:
        made.append(Replica(**overrides))
        return made[-1]

    yield make
    for r in made:
        r.close()


def settle(sinks: Sequence[Sink], summaries: Sequence[int], timeout: float = 15.0) -> None:
    """Wait for every expected run summary, then until nothing more arrives for a moment."""
    wait_for(lambda: all(len(s.runs()) >= n for s, n in zip(sinks, summaries)), timeout, "run summaries")
    last, quiet_since = -1, time.monotonic()
    while time.monotonic() - quiet_since < 0.3:
        count = sum(len(s.spans()) for s in sinks)
        if count != last:
            last, quiet_since = count, time.monotonic()
        time.sleep(0.05)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    return getattr(v, kind) if kind else None


# Attributes naming another finding span by its (random) id: compared by presence, as span ids are.
OTHER_SPAN_IDS = ("loopguard.finding.warn_span_id", "loopguard.finding.episode_span_id")


def _attrs(kvs: Iterable[Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((kv.key, "<span id>" if kv.key in OTHER_SPAN_IDS else _value(kv.value)) for kv in kvs))


def judged(sinks: Iterable[Sink]) -> dict[str, list[tuple[Any, ...]]]:
    """Everything the replicas said, minus the finding spans' own (random) span ids."""
    out: dict[str, list[tuple[Any, ...]]] = {FINDING: [], RUN: []}
    for sink in sinks:
        for s in sink.spans():
            kind = s.name.split(" ", 1)[0]  # loopguard.finding repeat/stop lookup_order
            assert kind in out, f"findings-only replica forwarded an app span: {s.name}"
            out[kind].append((
                s.trace_id.hex(), s.parent_span_id.hex(), s.start_time_unix_nano, s.end_time_unix_nano,
                _attrs(s.attributes),
                tuple((link.trace_id.hex(), link.span_id.hex()) for link in s.links),
                tuple((e.name, e.time_unix_nano, _attrs(e.attributes)) for e in s.events),
                s.name, s.status.code, s.status.message,
            ))
    return {k: sorted(v) for k, v in out.items()}


def kinds(spans: list[tuple[Any, ...]]) -> set[tuple[str, str]]:
    """The kinds found, those riding on another finding of their loop as an event too (issue 29)."""
    found = [dict(s[4]) for s in spans] + [dict(e[2]) for s in spans for e in s[6] if e[0] == "loopguard.finding"]
    return {(a["loopguard.finding.kind"], a["loopguard.finding.severity"]) for a in found}


# -- the proof -------------------------------------------------------------------------------


def test_replicas_split_by_trace_id_emit_exactly_what_one_receiver_emits(replicas: Callable[..., Replica]) -> None:
    runs = corpus()
    requests = batches(runs)
    shard_of_run = [replica_of(trace_of(r[0])) for r in runs]
    per_replica = [shard_of_run.count(i) for i in range(REPLICAS)]
    assert all(per_replica), f"seeds put every trace on one replica: {per_replica}"
    assert sum(len(b) > 0 and len({trace_of(s) for s in b}) > 1 for b in requests) > 1, "requests should mix traces"

    one = replicas()
    shards = [replicas() for _ in range(REPLICAS)]
    for batch in requests:
        one.send(batch)
        for replica, part in zip(shards, split(batch, lambda s: replica_of(trace_of(s)))):
            replica.send(part)
    settle([one.sink], [len(runs)])
    settle([r.sink for r in shards], per_replica)

    alone = judged([one.sink])
    together = judged(r.sink for r in shards)
    # Not vacuous: loops of every flavour were found, healthy runs were not flagged, and
    # each replica judged some of them.
    assert {("repeat", "stop"), ("cycle", "stop"), ("error_streak", "stop"), ("no_progress", "warn")} <= kinds(alone[FINDING])
    assert len(alone[RUN]) == len(runs)
    flagged = {s[0] for s in alone[FINDING]}
    assert len(flagged) < len(runs), "healthy runs must not be flagged"
    assert all(judged([r.sink])[FINDING] for r in shards), "every replica should have judged a loop"
    # The claim.
    assert together[FINDING] == alone[FINDING]
    assert together[RUN] == alone[RUN]


def _multi_trace_run(run_id: str) -> tuple[list[Any], list[Any]]:
    """One run (one loopguard.run.id) over two traces: calls 1-3 in the first, 4-6 in the
    second, the same action each time. Seeds are chosen so the traces hash to different
    replicas."""
    first = TaggedRun(run_id, seed=301)
    seed = 302
    while replica_of(TaggedRun(run_id, seed=seed).trace_id) == replica_of(first.trace_id):
        seed += 1
    second = TaggedRun(run_id, seed=seed)
    return [first.call(s) for s in (1, 2, 3)] + [first.root()], [second.call(s) for s in (4, 5, 6)] + [second.root()]


def test_a_run_spanning_two_traces_needs_routing_by_run_id(replicas: Callable[..., Replica]) -> None:
    """The documented limit of trace-id sharding, and its fix (routing_key: attributes)."""
    first, second = _multi_trace_run("conversation-42")
    spans = first + second
    fast = {"idle_timeout_seconds": 1.0, "gap_wait_seconds": 0.5}
    one = replicas(**fast)
    by_trace = [replicas(**fast) for _ in range(REPLICAS)]
    by_run = [replicas(**fast) for _ in range(REPLICAS)]
    run_replica = replica_of(b"conversation-42")
    for batch in (spans[:4], spans[4:]):  # two requests, one per trace, as an app would send them
        one.send(batch)
        for replica, part in zip(by_trace, split(batch, lambda s: replica_of(trace_of(s)))):
            replica.send(part)
        for replica, part in zip(by_run, split(batch, lambda s: run_replica)):
            replica.send(part)
    settle([one.sink], [1])
    settle([r.sink for r in by_trace], [1, 1])
    settle([by_run[run_replica].sink], [1])

    alone = judged([one.sink])
    split_by_trace = judged(r.sink for r in by_trace)
    split_by_run = judged(r.sink for r in by_run)

    assert ("repeat", "stop") in kinds(alone[FINDING])  # calls 1-5: the loop, seen whole
    # Split by trace: each replica judges a fragment. The first sees calls 1-3 (a warning at
    # most), the second starts at call 4 and reports the missing calls; nobody sees the loop.
    assert split_by_trace[FINDING] != alone[FINDING]
    assert ("repeat", "stop") not in kinds(split_by_trace[FINDING])
    assert any(kind == "incomplete_trace" for kind, _ in kinds(split_by_trace[FINDING]))
    assert len(split_by_trace[RUN]) == 2  # one run reported twice, as two fragments
    # Routed by the run id, one replica sees the whole run and agrees with the single receiver.
    assert split_by_run[FINDING] == alone[FINDING]
    assert split_by_run[RUN] == alone[RUN]
