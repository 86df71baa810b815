"""The receiver's own telemetry: counters and gauges, exposed as Prometheus text.

Names are documented in docs/receiver.md#metrics. Labels are kept small
(finding kind and tool) so cardinality stays bounded by the policy's tools.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Optional, Protocol

_log = logging.getLogger("otel_loopguard.receiver")

PREFIX = "otel_loopguard_"
HELP = {
    "spans_received_total": "Spans received in Export requests (valid ones).",
    "spans_forwarded_total": "Unique spans forwarded downstream (inline mode).",
    "spans_rejected_total": "Spans rejected as invalid (bad ids); reported as partial success.",
    "spans_rejected_downstream_total": "Forwarded spans the downstream refused in a partial success (passed back to the sender).",
    "duplicates_total": "Re-delivered spans dropped by (trace id, span id).",
    "spans_waited_total": "Copies of spans another request was delivering, held until it settled (then a duplicate, or delivered if it failed).",
    "conflicts_total": "Different spans under an id already seen; the later one is dropped.",
    "dedupe_evictions_total": "Dedupe entries evicted by size or age.",
    "findings_total": "Findings emitted, by kind, tool and severity (a warn folded into its stop still counts).",
    "loop_wasted_calls_total": "Tool calls spent in loops (docs/findings.md, waste), by tool and kind; each loop counted once.",
    "loop_wasted_seconds_total": "Tool time in seconds of the calls spent in loops, by tool and kind.",
    "loop_wasted_tokens_total": "Tokens of the model decisions in between the calls spent in loops, by tool and kind.",
    "loop_wasted_cost_usd_total": "Cost in USD of those model decisions, where the policy's prices price their model, by tool and kind.",
    "finding_spans_exported_total": "Finding and run summary spans delivered downstream.",
    "finding_spans_dropped_total": "Finding and run spans the downstream refused, or not delivered by shutdown.",
    "export_failures_total": "Failed attempts to send downstream (retried).",
    "backpressure_total": "Requests answered UNAVAILABLE (downstream down or memory bound reached).",
    "invalid_requests_total": "Requests that were not a valid ExportTraceServiceRequest.",
    "late_spans_total": "Tool, model and run-fact spans of runs that had already completed (forwarded; the run is judged again with its late calls).",
    "run_revisions_total": "Run summaries issued again, as revisions of the first, after late calls of the run were judged.",
    "runs_marked_partial_total": "Completed runs whose late calls came past the bound on judging again: a summary marks their verdict partial.",
    "clock_skew_total": "Tool calls outside their parent span's time range.",
    "runs_completed_total": "Runs judged complete.",
    "internal_errors_total": "Spans or runs that could not be judged because of an internal error (logged).",
    "unauthenticated_total": "Requests refused for a missing or invalid bearer token (gRPC and /metrics).",
    "reload_failures_total": "Reloads (SIGHUP or a changed policy file) refused, by setting; the running one was kept.",
    "phoenix_annotations_total": "Loop verdicts recorded as Phoenix annotations: on traces, root spans and looping calls (annotate_phoenix_url).",
    "phoenix_annotations_dropped_total": "Phoenix annotations not recorded (Phoenix refused or unreachable, or the queue was full).",
    "runs_cut_at_shutdown_total": "Open runs judged at shutdown as incomplete_trace (not saved to a state directory).",
    "runs_cut_by_restart_total": "Runs marked incomplete_trace as cut by a restart (docs/receiver.md, Restarts).",
    "runs_shed_total": "Open runs judged early as incomplete_trace because open runs reached their memory bound.",
    "requests_too_large_total": "Requests refused for good (RESOURCE_EXHAUSTED) as larger than the memory bound or max_request_spans allows.",
    "runs_open": "Runs currently open.",
    "memory_estimate_bytes": "Estimated bytes of the dedupe table, open runs, queues and requests being handled (memory_limit_mib).",
    "dedupe_entries": "(trace id, span id) pairs remembered for deduplication.",
    "buffered_calls": "Tool calls held waiting for order or completion.",
    "finding_queue": "Finding spans not yet delivered (waiting, or in the batch being sent).",
    "forward_queue_bytes": "Bytes of accepted requests waiting for the downstream, or being sent (inline mode).",
    "forward_queue_requests": "Accepted requests waiting for the downstream, or being sent (inline mode).",
    "spans_dropped_downstream_total": "Accepted spans the downstream refused for good, or not delivered by shutdown (inline mode).",
}


class Metrics:
    def __init__(self) -> None:
        self._values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        self._values[key] = self._values.get(key, 0) + amount

    def set_gauge(self, name: str, value: float) -> None:
        self._values[(name, ())] = value

    def get(self, name: str, **labels: str) -> float:
        """The sum of the series of `name` that carry these labels (others may differ: asking
        findings_total for kind and tool sums its severities)."""
        want = set(labels.items())
        return sum(v for (n, have), v in self._values.items() if n == name and want <= set(have))

    def render(self) -> str:
        lines: list[str] = []
        for name, help_text in HELP.items():
            kind = "counter" if name.endswith("_total") else "gauge"
            lines += [f"# HELP {PREFIX}{name} {help_text}", f"# TYPE {PREFIX}{name} {kind}"]
            series = [(labels, v) for (n, labels), v in self._values.items() if n == name] or [((), 0)]
            for labels, value in sorted(series):
                shown = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                text = _number(value)
                lines.append(f"{PREFIX}{name}{{{shown}}} {text}" if shown else f"{PREFIX}{name} {text}")
        return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    """Every digit of a count (`:g` would cut 1234567 to 1.23457e+06); a float as repr writes it."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class TokenCheck(Protocol):
    @property
    def enabled(self) -> bool: ...

    def accepts(self, authorization: Optional[bytes]) -> bool: ...


async def serve_metrics(metrics: Metrics, host: str, port: int, ssl_context: Optional[ssl.SSLContext] = None,
                        tokens: Optional[TokenCheck] = None) -> asyncio.base_events.Server:
    """A minimal HTTP endpoint: GET /metrics -> Prometheus text format; HTTPS with `ssl_context`,
    and `Authorization: Bearer <token>` required when `tokens` holds any."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), timeout=5)
            authorization: Optional[bytes] = None
            for _ in range(100):  # a bounded header block
                line = await asyncio.wait_for(reader.readline(), timeout=5)
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"authorization":
                    authorization = value.strip()
            method, path = (request.split(b" ") + [b"", b""])[:2]
            if tokens is not None and tokens.enabled and not tokens.accepts(authorization):
                metrics.inc("unauthenticated_total")
                body, status, extra = b"unauthorized\n", b"401 Unauthorized", b'WWW-Authenticate: Bearer realm="otel-loopguard"\r\n'
            elif method not in (b"GET", b"HEAD"):
                body, status, extra = b"method not allowed\n", b"405 Method Not Allowed", b"Allow: GET, HEAD\r\n"
            elif path.split(b"?")[0] in (b"/metrics", b"/"):
                body, status, extra = metrics.render().encode(), b"200 OK", b""
            else:
                body, status, extra = b"not found\n", b"404 Not Found", b""
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; version=0.0.4\r\n" + extra
                + b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n"
                + (body if method != b"HEAD" else b"")
            )
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError, IndexError, ssl.SSLError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port, ssl=ssl_context)
