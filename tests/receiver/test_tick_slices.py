"""The serve timer advances open runs in slices (receiver/runs/assembly.py ticking,
receiver/serve/running.py _advance_runs): the same spans as one tick, a run's spans together,
a run completed meanwhile passed over, and the event loop let go between slices so that a
burst of runs completing at once does not hold up every request."""

from __future__ import annotations

import asyncio

from otel_loopguard.receiver.out.downstream import Downstream
from otel_loopguard.receiver.out.finding_queue import FindingQueue
from otel_loopguard.receiver.serve import running
from tests.assembly.test_run_assembler import GRACE, Rig, attrs, finding_kinds, root, summaries, tool

TRACES = [bytes([0x20 + n]) * 16 for n in range(6)]


def _burst(rig: Rig) -> None:
    """Six runs, each looping, their roots ended: complete together at the grace."""
    for trace in TRACES:
        for seq in range(1, 5):
            rig.accept(tool(seq, trace=trace, dense=False))  # held: judged at completion
        rig.accept(root(trace=trace))


def _shape(spans) -> list:
    return [(attrs(s).get("loopguard.run.id"), attrs(s).get("loopguard.finding.kind"),
             attrs(s).get("loopguard.run.outcome")) for s in spans]


def test_ticking_gives_one_tick_a_run_at_a_time() -> None:
    whole, steps = Rig(), Rig()
    _burst(whole)
    _burst(steps)
    whole.clock.now = steps.clock.now = 100.0 + GRACE + 1
    at_once = whole.assembler.tick()
    parts = list(steps.assembler.ticking())
    assert len(parts) == len(TRACES) + 1  # each run, then the late calls
    assert _shape([s for p in parts for s in p]) == _shape(at_once)
    assert [len({attrs(s).get("loopguard.run.id") for s in p}) for p in parts[:-1]] == [1] * len(TRACES)
    assert len(summaries(at_once)) == len(TRACES) and finding_kinds(at_once)


def test_a_run_completed_between_steps_is_passed_over() -> None:
    rig = Rig()
    _burst(rig)
    rig.clock.now = 100.0 + GRACE + 1
    steps = rig.assembler.ticking()
    first = next(steps)
    flushed = rig.assembler.flush()  # the other runs completed meanwhile (as shutdown or shedding would)
    rest = [s for p in steps for s in p]
    assert rest == [] and rig.count("internal_errors_total") == 0
    assert len(summaries(first + flushed)) == len(TRACES)


def _queued(queue: FindingQueue) -> list:
    spans = []
    while queue.size:
        spans.append(queue._queue.get_nowait()[0])  # noqa: SLF001
        queue._queue.task_done()  # noqa: SLF001
    return [(*_shape([s])[0], sorted(k for k in attrs(s) if k.startswith("loopguard.finding."))) for s in spans]


def test_the_timer_lets_requests_in_between_slices_and_folds_as_one_tick(monkeypatch) -> None:
    monkeypatch.setattr(running, "TICK_SLICE_SECONDS", 0.0)  # every run a slice of its own
    sliced, whole = Rig(), Rig()
    for rig in (sliced, whole):
        _burst(rig)
        rig.clock.now = 100.0 + GRACE + 1
    order: list[str] = []

    async def main() -> tuple[list, list]:
        queues = [FindingQueue(Downstream("127.0.0.1:1", r.metrics, max_message_bytes=4 << 20), r.metrics)
                  for r in (sliced, whole)]
        put = queues[0].put
        queues[0].put = lambda spans: (order.append("put"), put(spans))[1]  # type: ignore[method-assign]

        async def request() -> None:
            await asyncio.sleep(0)
            order.append("request")

        other = asyncio.ensure_future(request())
        await running._advance_runs(sliced.assembler, queues[0], None)  # noqa: SLF001
        await other
        queues[1].put(whole.assembler.tick())  # the timer as it was: one put a tick
        return _queued(queues[0]), _queued(queues[1])

    got, expected = asyncio.run(main())
    assert order.index("request") < len(order) - 1  # a request's turn came before the tick was done
    assert order.count("put") == len(TRACES) + 2  # each run, the late calls, the (empty) rest
    assert got == expected and any(kind for _, kind, _, _ in got)
    assert not sliced.assembler.runs
