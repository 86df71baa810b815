"""Every file in collector_config/ run by the real OpenTelemetry Collector, end to end.

The Collector is the one scripts/otelcol.sh builds from collector_config/builder.yaml (core
v0.161.0, contrib v0.161.0). Each configuration is validated by `otelcol validate`, then
started with only its EDIT placeholders filled (otelcol.fill) and made to carry traffic from
an agent app in its own process (app.py: `otel_loopguard.install()` and the SDK's default
OTLP exporter) through real `otel-loopguard serve` processes to a counting backend
(backend.py). On CI these tests never skip: a missing build fails them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from . import scenarios as S
from .otelcol import CONFIGS, binary, fill, validate

pytestmark = pytest.mark.collector


@pytest.fixture(scope="module", autouse=True)
def _built() -> None:
    binary()  # skip (or, on CI, fail) the whole module once, with the reason


@pytest.fixture
def layouts() -> Iterator[list[S.Layout]]:
    started: list[S.Layout] = []
    yield started
    for layout in started:
        layout.stop()


# -- otelcol validate -----------------------------------------------------------------------


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_otelcol_validate_accepts_every_shipped_config(path: Path, tmp_path: Path) -> None:
    filled = fill(path.name, backend="127.0.0.1:4317", loopguard=["127.0.0.1:4327", "127.0.0.1:4328"],
                  storage=tmp_path / "storage")
    checked = validate(filled.write(tmp_path / path.name))
    assert checked.returncode == 0, checked.stderr


def test_otelcol_validate_is_a_real_check(tmp_path: Path) -> None:
    """The negative control: the same validation refuses a misspelled key and a bad value."""
    filled = fill("sharded.yaml", backend="127.0.0.1:4317", loopguard=["127.0.0.1:4327"])
    filled.doc["exporters"]["loadbalancing"]["routing_key"] = "traceId"
    checked = validate(filled.write(tmp_path / "bad.yaml"))
    assert checked.returncode != 0 and "traceId" in checked.stderr, checked.stderr
    filled = fill("fanout.yaml", backend="127.0.0.1:4317", loopguard=["127.0.0.1:4327"])
    filled.doc["exporters"]["otlp/backend"]["sending_queue"]["queue_sise"] = 10
    checked = validate(filled.write(tmp_path / "bad2.yaml"))
    assert checked.returncode != 0 and "queue_sise" in checked.stderr, checked.stderr


def test_the_new_component_names_validate_too(tmp_path: Path) -> None:
    """collector_config/README.md: renaming `otlp` -> `otlp_grpc` and `loadbalancing` -> `load_balancing` works."""
    filled = fill("sharded.yaml", backend="127.0.0.1:4317", loopguard=["127.0.0.1:4327"])
    text = yaml.safe_dump(filled.doc, sort_keys=False)
    text = text.replace("otlp/backend", "otlp_grpc/backend").replace("loadbalancing", "load_balancing")
    path = tmp_path / "renamed.yaml"
    path.write_text(text, encoding="utf-8")
    checked = validate(path)
    assert checked.returncode == 0, checked.stderr
    assert "otlp_grpc/backend" in path.read_text()


# -- fan-out and inline ----------------------------------------------------------------------


def _carry(layout: S.Layout, workdir: Path, runs: int = 20, conversations: bool = False) -> tuple[dict, S.Delivery]:
    """The app's runs through the layout's Collector, counted at the backend once all have arrived."""
    result = S.start_app(layout.collector.port("otlp"), workdir, runs=runs, rate=20, conversations=conversations).result()
    return result, S.wait_delivered(layout.backend, result, 60, explain=layout.explain)


def _healthy_and_loops(d: S.Delivery, runs: int) -> None:
    assert d.lost == 0 and d.duplicated == 0, d.row()
    assert d.loops == runs // 2 and d.loops_stopped == d.loops, d.row()
    assert d.healthy_flagged == 0 and d.unjudged == 0, d.row()


def test_fanout_every_span_once_at_the_backend_and_findings_come_back(tmp_path: Path,
                                                                      layouts: list[S.Layout]) -> None:
    layout = S.fanout(tmp_path)
    layouts.append(layout)
    _, d = _carry(layout, tmp_path)
    _healthy_and_loops(d, 20)
    assert d.summaries == 20, d.row()  # one run summary per trace, through otlp/findings


def test_a_collector_without_the_receivers_token_is_refused(tmp_path: Path, layouts: list[S.Layout]) -> None:
    """The negative control of the token in every config: a wrong one, and the receiver judges nothing,
    while the backend still gets every span (fan-out keeps otel-loopguard out of that path)."""
    layout = S.fanout(tmp_path, collector_token="not-the-receivers-token-0123456789")
    layouts.append(layout)
    result = S.start_app(layout.collector.port("otlp"), tmp_path, runs=4, rate=20).result()
    S.wait_until(lambda: S.created(result) <= set(layout.backend.app_counts()), 60, "the backend lost spans")
    S.wait_until(lambda: S.spans_received(layout.receivers[0], layout.secrets, "otel_loopguard_unauthenticated_total"),
                 30, "the receiver did not count the refused requests", explain=layout.explain)
    assert S.spans_received(layout.receivers[0], layout.secrets) == 0
    assert layout.backend.snapshot()[1:] == ([], [])  # no finding, no run summary
    assert "not-the-receivers-token" not in layout.receivers[0].logs()


def test_fanout_into_phoenix(tmp_path: Path, layouts: list[S.Layout]) -> None:
    """fanout.yaml with a real backend: the app's spans and the findings in the same Phoenix trace."""
    from e2e.phoenix_server import phoenix_installed, running_phoenix

    if not phoenix_installed():
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("arize-phoenix is not installed (the phoenix extra)")
    with running_phoenix(tmp_path) as phoenix:
        phoenix.wait_healthy(90)
        layout = S.fanout(tmp_path, backend_address=f"127.0.0.1:{phoenix.grpc_port}")
        layouts.append(layout)
        result = S.start_app(layout.collector.port("otlp"), tmp_path, runs=2, rate=20).result()
        (loop,), (healthy,) = result["loops"], result["healthy"]

        def stored(trace: str) -> list[dict]:
            return phoenix.spans("default", trace)

        def complete() -> bool:
            names = [s["name"] for s in stored(loop)]
            return len(names) >= len(result["spans"][loop]) and any(n.startswith("loopguard.run") for n in names) and any(
                s["attributes"].get("loopguard.finding.severity") == "stop" for s in stored(loop))

        S.wait_until(complete, 60, "Phoenix did not get the loop's spans, finding and summary", every=0.5,
                     explain=layout.explain)
        spans = stored(loop)
        app_ids = sorted(s["context"]["span_id"] for s in spans if not s["name"].startswith("loopguard."))
        assert app_ids == sorted(result["spans"][loop])  # every app span once
        stops = [s for s in spans if s["attributes"].get("loopguard.finding.severity") == "stop"]
        assert [s["attributes"]["loopguard.finding.kind"] for s in stops] == ["repeat"]
        assert stops[0]["attributes"]["loopguard.finding.span_ids"]  # navigable without links
        S.wait_until(lambda: any(s["name"].startswith("loopguard.run") for s in stored(healthy)), 30, "no healthy summary")
        assert not [s for s in stored(healthy) if s["attributes"].get("loopguard.finding.severity") in ("warn", "stop")]


def test_inline_every_span_passes_the_receiver_once(tmp_path: Path, layouts: list[S.Layout]) -> None:
    layout = S.inline(tmp_path)
    layouts.append(layout)
    _, d = _carry(layout, tmp_path)
    _healthy_and_loops(d, 20)
    assert S.spans_received(layout.receivers[0], layout.secrets) == d.created  # every app span went through otel-loopguard


# -- sharded ---------------------------------------------------------------------------------


def test_sharded_by_trace_id_judges_like_one_receiver(tmp_path: Path, layouts: list[S.Layout]) -> None:
    """sharded.yaml over two replicas, on the recorded real captures (and synthetic loops, for stops):
    the same findings and run summaries as one receiver, each trace judged by one replica."""
    payloads = S.bench_mix(4, 20)
    traces = S.trace_ids(payloads)
    (tmp_path / "one").mkdir()
    reference = S.judged_by_one(tmp_path / "one", payloads, len(traces))
    _, ref_findings, ref_summaries = reference.snapshot()
    reference.down()
    assert {(f.kind, f.severity) for f in ref_findings} >= {("repeat", "warn"), ("repeat", "stop")}

    # A run's root is given 5 s, not 1, for its last calls: a run split over two requests here
    # reached a replica through the Collector's exporter more than a second after its root, on
    # a loaded machine, and was judged on half its calls (late spans, as with any receiver;
    # not what this test compares). The reference receiver gets its requests directly.
    layout = S.sharded(tmp_path, args=["--root-grace-seconds", "5"])
    layouts.append(layout)
    S.send_raw(layout.collector.port("otlp"), payloads)
    S.wait_until(lambda: len(layout.backend.snapshot()[2]) >= len(traces), 60,
                 "the replicas did not judge every run", explain=layout.explain)
    # A run's summary can overtake its findings: the Collector's exporters send batches in
    # parallel. Waited for (a loaded machine took more than a second), then compared exactly.
    expected = S.finding_set(ref_findings)
    S.wait_until(lambda: S.finding_set(layout.backend.snapshot()[1]) == expected, 30,
                 "the replicas' findings did not all arrive", explain=layout.explain)
    time.sleep(1.0)
    counts, findings, summaries = layout.backend.snapshot()

    # Nothing lost or doubled on the way to the backend (otlp/backend is the fan-out path).
    sent = {k for k, n in layout.backend.app_counts().items()}
    assert {t for t, _ in sent} == traces and all(n == 1 for n in layout.backend.app_counts().values())
    # Each trace judged by one replica: one summary per trace, and both replicas took a share.
    assert sorted(s.trace_id for s in summaries) == sorted(traces)
    shares = [S.spans_received(r, layout.secrets) for r in layout.receivers]
    assert all(share > 0 for share in shares) and sum(shares) == sum(layout.backend.app_counts().values()), shares
    # The findings and summaries one receiver gives, exactly.
    assert S.finding_set(findings) == S.finding_set(ref_findings)
    assert S.summary_set(summaries) == S.summary_set(ref_summaries)


def test_sharded_dns_resolver_carries_traffic(tmp_path: Path, layouts: list[S.Layout]) -> None:
    """sharded-dns.yaml: the replica list from a name lookup (here the loopback address itself)."""
    layout = S.sharded(tmp_path, "sharded-dns.yaml", replicas=1)
    layouts.append(layout)
    _, d = _carry(layout, tmp_path)
    _healthy_and_loops(d, 20)
    assert d.summaries == 20 and S.spans_received(layout.receivers[0], layout.secrets) == d.created


CONVERSATION_ARGS = ["--run-id-attribute", "gen_ai.conversation.id", "--idle-timeout-seconds", "3"]


def test_sharded_by_conversation_keeps_each_run_on_one_replica(tmp_path: Path, layouts: list[S.Layout]) -> None:
    """sharded-by-conversation.yaml: runs of two traces each, tied by gen_ai.conversation.id, judged whole."""
    layout = S.sharded(tmp_path, "sharded-by-conversation.yaml", args=CONVERSATION_ARGS)
    layouts.append(layout)
    _, d = _carry(layout, tmp_path, runs=40, conversations=True)
    _healthy_and_loops(d, 40)
    assert {len(v) for v in S.by_run(layout.backend.snapshot()[2]).values()} == {1}  # one summary per run
    assert all(S.spans_received(r, layout.secrets) > 0 for r in layout.receivers)


def test_conversations_routed_by_trace_id_are_split(tmp_path: Path, layouts: list[S.Layout]) -> None:
    """The negative control: the same conversations through sharded.yaml (trace id routing) lose their stops."""
    layout = S.sharded(tmp_path, "sharded.yaml", args=CONVERSATION_ARGS)
    layouts.append(layout)
    _, d = _carry(layout, tmp_path, runs=40, conversations=True)
    assert d.lost == 0 and d.loops == 20
    # A conversation's two traces land on one replica with probability 1/2: 20 loops all whole is 1 in 2^20.
    assert d.loops_stopped < d.loops, d.row()


# -- failures while traffic flows --------------------------------------------------------------


def test_a_shard_restarted_mid_stream_loses_no_span(tmp_path: Path) -> None:
    d = S.shard_restart(tmp_path)
    print("shard restart:", d.row())
    assert d.lost == 0 and d.duplicated == 0, d.row()  # the backend path does not go through the replicas
    assert d.healthy_flagged == 0, d.row()
    # Only runs in flight while replica 1 restarted can be judged in pieces (at 20 runs/s, a few),
    # and those show their gap: every loop is stopped or marked incomplete, but for a couple.
    assert d.loops_stopped + d.loops_incomplete >= d.loops - 2, d.row()


def test_store_and_forward_through_an_outage_and_receiver_restarts(tmp_path: Path) -> None:
    """inline-with-collector.yaml with its queues on disk: 30 s backend outage, then the receiver
    SIGTERMed and SIGKILLed mid-stream (each restarted at once). Target: nothing lost."""
    d = S.store_and_forward(tmp_path)
    print("store and forward:", d.row())
    assert d.lost == 0, d.row()
    # A SIGKILL between forwarding and answering the Collector makes the Collector send that request
    # again, to a receiver that no longer remembers it: at most the requests in flight (2 consumers x
    # 2048 spans at most per request).
    assert d.duplicated <= 2 * 2048, d.row()
    assert d.healthy_flagged == 0, d.row()
    assert d.loops_stopped + d.loops_incomplete >= d.loops - 5, d.row()


def test_without_the_disk_queues_a_collector_restart_in_an_outage_loses_spans(tmp_path: Path) -> None:
    """The negative control of file_storage: the same Collector restart during a backend outage, with the
    queues in memory (the exporters' default), drops what was queued for the backend."""
    d = S.store_and_forward(tmp_path, runs=300, outage=(2, 14), collector_at=8, term_at=None, kill_at=None,
                            on_disk=False)
    print("in-memory queues:", d.row())
    assert d.lost > 0, d.row()
