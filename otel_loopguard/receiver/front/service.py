"""The OTLP/gRPC TraceService: dedupe, forward, then detect, or tell the sender to retry.

Order of operations per request:
1. Open runs over their share of the memory bound -> the least recently active are
   judged now as incomplete (budget.py), so one sender's unfinished traces cannot
   freeze intake. A request larger than the bound allows, or of more than
   max_request_spans spans -> RESOURCE_EXHAUSTED, for good (send smaller batches).
   The memory estimate with this request over the bound -> UNAVAILABLE with
   RetryInfo (nothing accepted).
2. Decode (requests of a megabyte or more in a worker thread: decoding is pure);
   reject invalid spans (partial success with a message).
3. Classify each span: new, duplicate (dropped, counted) or conflict (dropped),
   and claim the new ones (ingest/inflight.py). A copy of a span another request
   has claimed is set aside: the rest of the request goes on at once (steps 4-5),
   then the copy waits for that request to settle, and is a duplicate if it was
   accepted, or new (delivered from here) if it failed. If the other request has
   not settled within forward_timeout_seconds (and a margin), the sender hears
   UNAVAILABLE with RetryInfo: what was accepted is a duplicate in its retry, and
   the copy is not lost (a partial success would be: OTLP senders never retry one).
4. Inline mode: the original bytes when nothing was dropped, else a filtered
   copy, go into the forward queue (delivery.py), and the sender is answered;
   a full queue -> UNAVAILABLE with RetryInfo, before anything is remembered.
   Without a queue (forward_queue_bytes: 0) the request is forwarded first, without
   holding anything else up; if the downstream stays down -> UNAVAILABLE with
   RetryInfo and nothing is remembered, so the sender's retry is not mistaken
   for a duplicate.
5. Only then remember the spans and feed the detectors; findings are queued.
   Without a queue, steps 4-5 run to the end even when the sender cancels (its
   deadline passed): the downstream may already hold the spans.

Steps 3 and 5 run in pieces of PIECE_SPANS spans, yielding to the event loop between
pieces, so one huge request cannot hold up the others (a small request needs several
turns of the event loop, and waits for a piece at each one). That is safe because a
span is claimed (in flight) in the same piece that classifies it, and stays claimed
until it is remembered; step 5 runs in a task of its own, so a sender that gives up
midway cannot leave a request half remembered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any, Awaitable, Optional

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ..runs.assembly import RunAssembler
from ..ops.budget import MIB, MemoryBudget, largest_request, working_bytes
from ..config import ReceiverConfig
from ..ingest.decode import Decoded, DecodedRequest, TooManySpans
from ..ingest.decoder import decode, decode_in_pieces
from ..ingest.dedupe import CONFLICT, DUPLICATE, NEW, SpanDeduper
from ..ingest.inflight import Claim, InFlight
from ..state.judged import JudgedLog
from ..out.delivery import ForwardQueue
from ..out.downstream import DATA_FAULTS, REJECTED, SENT, Downstream, SendResult
from ..out.finding_queue import FindingQueue
from ..ops.metrics import Metrics

_log = logging.getLogger("otel_loopguard.receiver")
LARGE_REQUEST_BYTES = 1 << 20  # decoded off the event loop, and in pieces, from this size on
PIECE_SPANS = 256  # classified and judged this many spans at a time, yielding between pieces
# Beyond the other request's forward timeout, for its judging: then the copy's sender retries.
SETTLE_MARGIN_SECONDS = 1.0
SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


class TraceReceiver:
    def __init__(
        self,
        *,
        config: ReceiverConfig,
        assembler: RunAssembler,
        deduper: SpanDeduper,
        downstream: Optional[Downstream],
        findings: FindingQueue,
        metrics: Metrics,
        forward_queue: Optional[ForwardQueue] = None,
        budget: Optional[MemoryBudget] = None,
        judged: Optional[JudgedLog] = None,
    ):
        """`judged`: with a state_dir and a forward queue, which requests still feed open runs (judged.py)."""
        self._config = config
        self._budget = budget or MemoryBudget(
            limit_bytes=working_bytes(config.memory_limit_mib), max_open_runs=config.max_open_runs,
            max_buffered_calls=config.max_buffered_calls, deduper=deduper, assembler=assembler, findings=findings,
            queue=forward_queue)
        self._largest = largest_request(self._budget.limit)
        self._queue = forward_queue
        self._assembler = assembler
        self._deduper = deduper
        self._downstream = None if config.findings_only else downstream
        self._findings = findings
        self._metrics = metrics
        self._in_flight = InFlight()
        self.judged = judged
        self._deliveries: set[asyncio.Future[Any]] = set()
        self.handling = 0  # requests between arrival and answer
        self._arrived = time.monotonic()  # the last request's arrival

    def quiet_for(self) -> float:
        """Seconds since the last request arrived; 0 while one is in hand."""
        return 0.0 if self.handling or self._deliveries else time.monotonic() - self._arrived

    def handler(self) -> grpc.GenericRpcHandler:
        export = grpc.unary_unary_rpc_method_handler(
            self.export,
            request_deserializer=None,  # keep the original bytes for forwarding
            response_serializer=ExportTraceServiceResponse.SerializeToString,
        )
        return grpc.method_handlers_generic_handler(SERVICE, {"Export": export})

    async def export(self, data: bytes, context: grpc.aio.ServicerContext) -> ExportTraceServiceResponse:
        self.shed_runs()
        if len(data) > self._largest:
            await self._too_large(context, f"the request is {len(data) / MIB:.1f} MiB, more than this receiver "
                                  f"takes in one ({self._largest / MIB:.1f} MiB, set by memory_limit_mib): "
                                  "send smaller batches")
        if self._findings.full or not self._budget.room_for(len(data)):
            await self._retry_later(context, "otel-loopguard is at its memory bound; retry shortly")
        if self._queue is not None and not self._queue.room_for(len(data)):
            await self._retry_later(context, "otel-loopguard's forward queue is full (the downstream is slow or down); "
                                    "retry shortly")
        held = [self._budget.reserve(len(data))]
        self.handling += 1
        self._arrived = time.monotonic()
        try:
            return await self._export(data, context, held)
        finally:
            self.handling -= 1
            self._budget.release(sum(held))

    async def _export(self, data: bytes, context: grpc.aio.ServicerContext, held: list[int]) -> ExportTraceServiceResponse:
        decoded = await self._decode(data, context)
        # Small spans decode to more than four times their size: counted as decoded (released by export()).
        held.append(self._budget.reserve_decoded(len(data), len(decoded.spans)))
        claim = self._in_flight.claim()
        try:
            fresh, dropped, waiting = await self._classify_all(decoded.spans, claim)
        except BaseException:  # the sender gave up: nothing was accepted
            claim.release()
            raise
        results = [await self._take(data, decoded, fresh, dropped, claim, len(decoded.rejected))]
        left: list[Decoded] = []
        if waiting and results[0].status == SENT:
            more, left = await self._after_others(data, decoded, waiting)
            results += more
        _free_later(data, decoded.spans, fresh, dropped)
        for result in results:
            if result.status != SENT:
                await self._refuse(result, context)
        if left:
            await self._retry_later(context, f"{len(left)} spans of this request are still being delivered by another "
                                    "request (the others were accepted); retry shortly")
        return _response(decoded.rejected, _merged(results))

    async def _take(self, data: bytes, decoded: DecodedRequest, fresh: list[Decoded],
                    dropped: list[tuple[Decoded, str]], claim: Claim, rejected: int = 0) -> SendResult:
        """Accept these spans of the request: queued (inline mode's queue), or forwarded first."""
        if self._queue is not None:
            await self._shielded(self._enqueue(data, decoded, fresh, dropped, claim, rejected))
            return _NOTHING_REFUSED
        # Shielded: a sender whose deadline passes mid-forward cancels this handler, but the
        # downstream may already hold the spans. They are remembered and judged all the same,
        # so the sender's retry is a duplicate, not a second delivery.
        return await self._shielded(self._deliver(data, decoded, fresh, dropped, claim, rejected))

    async def _after_others(self, data: bytes, decoded: DecodedRequest, waiting: list[Decoded]
                            ) -> tuple[list[SendResult], list[Decoded]]:
        """Copies of spans other requests were delivering, once those settle: a duplicate where
        the other was accepted, new (delivered from here) where it failed. Returns the outcomes
        and the copies still in flight when the bound passed (the sender retries those)."""
        self._metrics.inc("spans_waited_total", len(waiting))
        deadline = time.monotonic() + self._settle_seconds()
        results: list[SendResult] = []
        while waiting and time.monotonic() < deadline:
            others = self._in_flight.settled(d.key for d in waiting)
            if others:
                await asyncio.wait(others, timeout=deadline - time.monotonic(), return_when=asyncio.FIRST_COMPLETED)
            claim = self._in_flight.claim()
            try:
                fresh, dropped, waiting = await self._classify_all(waiting, claim)
            except BaseException:
                claim.release()
                raise
            if not fresh and not dropped:  # none settled yet (or another request took them over)
                claim.release()
                continue
            results.append(await self._take(data, decoded, fresh, dropped, claim))
            if results[-1].status != SENT:
                break  # refused: the sender retries the request, these copies with it
        return results, waiting

    def _settle_seconds(self) -> float:
        """How long a copy waits for the request delivering its span: that request's forward
        (at most forward_timeout_seconds) and its judging."""
        return self._config.forward_timeout_seconds + SETTLE_MARGIN_SECONDS

    async def _shielded(self, work: Awaitable[Any]) -> Any:
        """Run to the end even if the sender cancels; shutdown waits for it (settle)."""
        task = asyncio.ensure_future(work)
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)
        return await asyncio.shield(task)

    def shed_runs(self) -> None:
        """Open runs over their share of the memory bound: the least recently active are judged
        now, as incomplete, rather than every sender refused (budget.py)."""
        if not self._budget.runs_over():
            return
        why = (f"judged before it completed: the receiver was at its bound for open runs ({len(self._assembler.runs)} "
               "runs; max_open_runs, max_buffered_calls, a quarter of memory_limit_mib) and this run had been quiet "
               "longest; later spans of it are forwarded, not judged")
        self._findings.put(self._assembler.shed(self._budget.runs_under_target, why))

    async def _enqueue(self, data: bytes, decoded: DecodedRequest, fresh: list[Decoded],
                       dropped: list[tuple[Decoded, str]], claim: Claim, rejected: int) -> None:
        """Queue the unique spans for the downstream, then remember and judge them."""
        assert self._queue is not None
        ref = None
        try:
            if fresh:
                ref = self._queue.put(await self._payload(data, decoded, fresh), len(fresh),
                                      b"".join(d.key for d in fresh))
            await self._accept(rejected, fresh, dropped)
            if ref is not None and self.judged is not None:  # state_dir: kept on disk until its runs are judged
                self.judged.fed(ref, {d.run_id for d in fresh if d.run_id in self._assembler.runs})
        finally:
            claim.release()

    async def _payload(self, data: bytes, decoded: DecodedRequest, fresh: list[Decoded]) -> bytes:
        """The original bytes when every span goes: no re-encoding on the common path."""
        if len(fresh) == len(decoded.spans) and not decoded.rejected:
            return data
        if len(data) >= LARGE_REQUEST_BYTES:
            return await asyncio.to_thread(_filtered_bytes, data, fresh)
        return _filtered_bytes(data, fresh)

    async def _deliver(self, data: bytes, decoded: DecodedRequest, fresh: list[Decoded],
                       dropped: list[tuple[Decoded, str]], claim: Claim, rejected: int) -> SendResult:
        """Forward (inline mode), then remember and judge; on a refusal nothing is remembered."""
        try:
            downstream = _NOTHING_REFUSED
            if self._downstream is not None and fresh:
                downstream = await self._forward(await self._payload(data, decoded, fresh), len(fresh))
                if downstream.status != SENT:
                    return downstream
            await self._accept(rejected, fresh, dropped)
            return downstream
        finally:
            claim.release()

    async def settle(self, timeout: float) -> None:
        """Wait for deliveries whose senders are gone (at shutdown: judged before the flush)."""
        if self._deliveries:
            await asyncio.wait(set(self._deliveries), timeout=timeout)

    async def _accept(self, rejected: int, fresh: list[Decoded], dropped: list[tuple[Decoded, str]]) -> None:
        """Remember and judge the accepted spans of a request, a piece at a time. Counted only
        now: a refused request (or copy still in flight) is counted when its retry lands."""
        self._metrics.inc("spans_received_total", len(fresh) + len(dropped))
        self._metrics.inc("spans_rejected_total", rejected)
        for _, verdict in dropped:
            self._metrics.inc("duplicates_total" if verdict == DUPLICATE else "conflicts_total")
        calls_here = any(d.call is not None for d in fresh)
        for start in range(0, len(fresh), PIECE_SPANS):
            if start:
                await asyncio.sleep(0)  # other senders' turn
            piece = fresh[start:start + PIECE_SPANS]
            self._deduper.remember_all((d.key, d.content) for d in piece)
            self._findings.put(self._assembler.accept(piece, calls_here))
        self._metrics.set_gauge("dedupe_evictions_total", self._deduper.evictions)
        out = []
        for d, verdict in dropped:
            out += self._assembler.duplicate(d) if verdict == DUPLICATE else self._assembler.conflict(d)
        self._findings.put(out)

    async def _decode(self, data: bytes, context: grpc.aio.ServicerContext) -> DecodedRequest:
        try:
            if len(data) >= LARGE_REQUEST_BYTES:
                # Megabytes take tens of milliseconds to parse: in a worker thread, so other
                # senders, health checks and run timers keep their turn on the event loop.
                return await asyncio.to_thread(self._parse, data)
            return self._parse(data)
        except TooManySpans as exc:
            await self._too_large(context, str(exc))
            raise  # unreachable: abort raises
        except (DecodeError, RuntimeError) as exc:
            self._metrics.inc("invalid_requests_total")
            message = f"not an OTLP ExportTraceServiceRequest: {exc}"
            if "MaxDepth" in str(exc):  # maybe valid OTLP, but deeper than protobuf's Python runtime decodes
                message = ("the request nests messages deeper than this receiver can decode (protobuf's limit "
                           f"of 100 levels: about 30 levels of maps in an attribute value): {exc}")
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)
            raise  # unreachable: abort raises

    def _parse(self, data: bytes) -> DecodedRequest:
        return parse_request(data, self._config.run_id_attribute, self._config.max_request_spans)

    async def _classify_all(self, spans: list[Decoded], claim: Claim
                            ) -> tuple[list[Decoded], list[tuple[Decoded, str]], list[Decoded]]:
        """Classify a piece at a time, claiming each piece's new spans in the same step (no await
        between): new, dropped, and copies of spans another request is delivering."""
        fresh: list[Decoded] = []
        dropped: list[tuple[Decoded, str]] = []
        waiting: list[Decoded] = []
        in_request: dict[bytes, int] = {}
        for start in range(0, len(spans), PIECE_SPANS):
            if start:
                await asyncio.sleep(0)  # other senders' turn
            new, old = self._classify(spans[start:start + PIECE_SPANS], in_request)
            for d in new:
                if d.key in self._in_flight:
                    waiting.append(d)
                else:
                    claim.take(d.key)
                    fresh.append(d)
            dropped += old
        return fresh, dropped, waiting

    def _classify(self, spans: list[Decoded], in_request: dict[bytes, int]
                  ) -> tuple[list[Decoded], list[tuple[Decoded, str]]]:
        fresh: list[Decoded] = []
        dropped: list[tuple[Decoded, str]] = []
        for d in spans:
            verdict = self._deduper.check(d.key, d.content)
            if verdict == NEW and d.key in in_request:
                verdict = DUPLICATE if in_request[d.key] == d.content else CONFLICT
            if verdict == NEW:
                in_request[d.key] = d.content
                fresh.append(d)
            else:
                dropped.append((d, verdict))
        return fresh, dropped

    async def _forward(self, payload: bytes, spans: int) -> SendResult:
        """The downstream's answer (with a partial success clamped and counted when it took them)."""
        assert self._downstream is not None
        result = await self._downstream.send(payload, self._config.forward_timeout_seconds)
        if result.status == SENT:
            if result.rejected_spans > spans:  # a downstream cannot refuse more than it was sent
                result = replace(result, rejected_spans=spans)
            self._metrics.inc("spans_forwarded_total", spans - result.rejected_spans)
            if result.rejected_spans:
                self._metrics.inc("spans_rejected_downstream_total", result.rejected_spans)
        return result

    async def _refuse(self, result: SendResult, context: grpc.aio.ServicerContext) -> None:
        """Tell the sender why the downstream did not take the spans; always aborts."""
        assert self._downstream is not None
        if result.status == REJECTED and result.code in DATA_FAULTS:
            # The data itself is refused (malformed, too large): retrying cannot help.
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the downstream endpoint rejected these spans: {result.detail}")
        elif result.status == REJECTED:
            # Our own misconfiguration (auth, wrong endpoint): keep the data at the sender.
            code = result.code.name if result.code else "error"
            await self._retry_later(context, f"downstream {self._downstream.target} refused the spans ({code}); retry later")
        else:
            await self._retry_later(context, f"downstream {self._downstream.target} is unavailable; retry later")
        raise AssertionError("unreachable: every refusal aborts the call")

    async def _too_large(self, context: grpc.aio.ServicerContext, message: str) -> None:
        """Refused for good: without RetryInfo, RESOURCE_EXHAUSTED is not retried (OTLP), and
        the same request would be refused again."""
        self._metrics.inc("requests_too_large_total")
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)

    async def _retry_later(self, context: grpc.aio.ServicerContext, message: str) -> None:
        self._metrics.inc("backpressure_total")
        await context.abort(grpc.StatusCode.UNAVAILABLE, message, trailing_metadata=retry_trailers(
            self._config.retry_after_seconds, message))


def parse_request(data: bytes, run_id_attribute: Optional[str], max_spans: Optional[int] = None) -> DecodedRequest:
    """Pure: touches no receiver state, so it may run in any thread (and the benchmark
    measures exactly this). The parse validates the whole request as the full schema
    would (UTF-8 strings included: otlp/lite.py) and serves the hot path; a large request
    is parsed in pieces, none of which holds the interpreter long (otlp/pieces.py)."""
    if len(data) >= LARGE_REQUEST_BYTES:
        return decode_in_pieces(data, run_id_attribute, max_spans)
    return decode(data, run_id_attribute, max_spans)


def _free_later(data: bytes, *records: list[Any]) -> None:
    """A large request's records, freed a piece at a time on the event loop once its handler
    is done with them: freed at once as it returned, 100,000 spans' records held up every
    sender for about 0.1 s (docs/reliability.md, "One huge request")."""
    if len(data) >= LARGE_REQUEST_BYTES:
        asyncio.get_running_loop().call_soon(_free_in_pieces, records)


def _free_in_pieces(records: tuple[list[Any], ...]) -> None:
    for items in records:
        del items[:PIECE_SPANS]
    if any(records):
        asyncio.get_running_loop().call_soon(_free_in_pieces, records)


def retry_trailers(seconds: float, message: str) -> tuple[tuple[str, bytes], ...]:
    """RetryInfo where the Python exporter reads it and in the standard status details."""
    delay = duration_pb2.Duration(seconds=int(seconds), nanos=int((seconds % 1) * 1e9))
    info = error_details_pb2.RetryInfo(retry_delay=delay)
    packed = any_pb2.Any()
    packed.Pack(info)
    status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message=message, details=[packed])
    return (
        ("google.rpc.retryinfo-bin", info.SerializeToString()),
        ("grpc-status-details-bin", status.SerializeToString()),
    )


def _filtered_bytes(data: bytes, fresh: list[Decoded]) -> bytes:
    """The request without the spans dropped (duplicates, invalid ones): only then is it
    parsed by the full schema, to be cut and written again."""
    return _keep_only(ExportTraceServiceRequest.FromString(data), fresh).SerializeToString()


def _keep_only(request: ExportTraceServiceRequest, fresh: list[Decoded]) -> ExportTraceServiceRequest:
    """A copy of the request with only the given spans (resources and scopes kept)."""
    keep = {d.where for d in fresh}
    out = ExportTraceServiceRequest()
    for r, rs in enumerate(request.resource_spans):
        new_rs = None
        for s, ss in enumerate(rs.scope_spans):
            spans = [span for i, span in enumerate(ss.spans) if (r, s, i) in keep]
            if not spans:
                continue
            if new_rs is None:
                new_rs = out.resource_spans.add(resource=rs.resource, schema_url=rs.schema_url)
            new_rs.scope_spans.add(scope=ss.scope, schema_url=ss.schema_url, spans=spans)
    return out


_NOTHING_REFUSED = SendResult(SENT)


def _merged(results: list[SendResult]) -> SendResult:
    """The downstream's partial successes over the parts of one request, as one."""
    if len(results) == 1:
        return results[0]
    details = [r.detail for r in results if r.detail]
    return SendResult(SENT, detail="; ".join(details), rejected_spans=sum(r.rejected_spans for r in results))


def _response(rejected: list[tuple[tuple[int, int, int], str]], downstream: SendResult) -> ExportTraceServiceResponse:
    """Our own rejections plus the downstream's partial success, passed back to the sender."""
    count = len(rejected) + downstream.rejected_spans
    messages = [why for _, why in rejected[:5]] + (["..."] if len(rejected) > 5 else [])
    if downstream.detail:
        messages.append(f"downstream: {downstream.detail}")
    if not count and not messages:
        return ExportTraceServiceResponse()
    partial = ExportTracePartialSuccess(rejected_spans=count, error_message="; ".join(messages))
    return ExportTraceServiceResponse(partial_success=partial)
