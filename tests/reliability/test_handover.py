"""Restarts without a gap (issue 27, docs/reliability.md "Restarts without a gap"): real receiver
processes with `--state-dir`, an app on the SDK's default exporter (load_app.py, install())
sending straight to them at a moderate load, a counting backend; loopback only.

- A handover (a new process started beside the running one: same port through SO_REUSEPORT,
  the old one stops once the new one listens, the new one takes the state directory over)
  loses no span, never refuses a connection, and the runs open across it are judged whole: every
  loop is stopped, none is cut.
- SIGKILL and a new process at once: the app's exporter retries, and no span is lost.
- The control: stop, then start (the old way) leaves the port closed for a while, which the
  prober sees; the test fails when that gap is gone, showing it can.
- The protocol's edges: a successor waits for the lock and keeps what it took in; an inbox
  whose process died is replayed by the next owner; a receiver on another address is refused.
Each waits on what the processes say (log lines, what the backend stored), bounded.
"""

from __future__ import annotations

import re
from pathlib import Path

from live import wait_until

from . import handover as H

# 20 new traces a second, 9 turns each 0.3 s apart: about 55 open traces, 380 spans a second, so
# the SDK's queue of 2,048 spans holds 5 s: its first two retries (1 s, then 2 s, each +-20%)
# fit, even when a busy machine slows a restart after SIGKILL to 2 s.
LOAD = dict(rate=20, seconds=8, at=4)


def test_a_handover_under_load_loses_nothing_and_judges_the_runs_open_across_it(tmp_path: Path) -> None:
    row = H.run(tmp_path, "handover", **LOAD)
    logs = "\n".join(p.read_text(errors="replace") for p in sorted(tmp_path.glob("receiver-*.err")))
    assert row["lost"] == 0 and row["duplicated"] == 0, row
    assert row["refused_connects"] == 0, row  # the app never found the port closed...
    assert row["exporter_retries"] == 0 and row["exporter_failures"] == 0, row  # ...nor had a request fail
    assert row["old_exit"] == 0, row
    restored = [int(n) for n in re.findall(r"(\d+) open runs restored from the last shutdown", logs)]
    assert restored and max(restored) > 0, logs  # runs were open across the handover...
    assert row["loops_stopped"] == row["loops"] and row["loops_missed"] == 0, row  # ...and judged whole
    assert row["runs_incomplete"] == 0 and row["cut_passing"] == 0 and row["unjudged"] == 0, row
    assert "Traceback" not in logs, logs


def test_sigkill_and_an_immediate_restart_lose_no_span(tmp_path: Path) -> None:
    row = H.run(tmp_path, "kill-start", **LOAD)
    logs = "\n".join(p.read_text(errors="replace") for p in sorted(tmp_path.glob("receiver-*.err")))
    # At least once downstream: only a request sent again by the next process (the downstream may
    # have taken it just before the kill, test_crash_windows.py) can arrive twice, never more.
    resent = sum(int(n) for n in re.findall(r"queue: \d+ accepted requests \((\d+) spans\) not yet delivered", logs))
    assert row["lost"] == 0 and row["duplicated"] <= resent, row
    assert row["loops_missed"] == 0 and row["unjudged"] == 0, row


def test_control_stop_then_start_leaves_the_port_closed(tmp_path: Path) -> None:
    row = H.run(tmp_path, "stop-start", **LOAD)
    assert row["refused_connects"] > 0 and row["port_closed_s"] > 0.05, row  # the gap the handover closes


def test_a_successor_waits_for_the_lock_and_keeps_what_it_took_in(tmp_path: Path) -> None:
    """The protocol without load: the successor answers while the owner holds the directory, and
    what it took in reaches the backend once the owner let go."""
    from collector import scenarios as S
    from collector.backend import CountingBackend

    from .test_restarts import spans_of
    from . import handmade

    backend = CountingBackend()
    r = H.receiver(backend, tmp_path).start()
    try:
        first = handmade.many(3)
        S.send_raw(r.port, first)
        old = r.proc
        assert old is not None
        H.spawn(r)
        log = r.stderr
        wait_until(lambda: H.TOOK_OVER in log.read_text(errors="replace"), 60, "no takeover",
                   explain=lambda: log.read_text(errors="replace"), every=0.02)
        assert old.wait(30) == 0
        later = handmade.many(2)
        S.send_raw(r.port, later)
        wanted = spans_of(first) | spans_of(later)
        wait_until(lambda: wanted <= set(backend.app_counts()), 30, "not delivered", explain=r.logs)
        assert all(backend.app_counts()[k] == 1 for k in wanted)
        assert not (tmp_path / "state" / "inbox").exists() or not any((tmp_path / "state" / "inbox").iterdir())
    finally:
        r.stop()
        backend.down()


def test_an_inbox_left_by_a_dead_successor_is_replayed_by_the_next_owner(tmp_path: Path) -> None:
    """A successor killed after answering into its inbox: the requests it answered are not lost."""
    from collector import scenarios as S
    from collector.backend import CountingBackend

    from otel_loopguard.receiver.state.spool import Spool

    from .test_restarts import spans_of
    from . import handmade

    orphan = tmp_path / "state" / "inbox" / "999999"
    orphan.mkdir(parents=True)
    (orphan / "lock").touch()  # no process holds it: its owner is gone
    answered = handmade.many(2)
    spool = Spool(orphan)
    spool.recover()
    for data in answered:
        spool.append(data, 0, b"")
    spool.close()
    backend = CountingBackend()
    r = H.receiver(backend, tmp_path).start()
    try:
        wanted = spans_of(answered)
        wait_until(lambda: wanted <= set(backend.app_counts()), 30, "the orphaned inbox was not replayed",
                   explain=r.logs)
        assert not orphan.exists()
        assert "2 requests taken in meanwhile replayed" in r.logs()
    finally:
        r.stop()
        backend.down()


def test_a_second_receiver_on_another_address_is_still_refused(tmp_path: Path) -> None:
    """Only a receiver listening where the owner listens takes over; any other stops at start."""
    from collector.backend import CountingBackend
    from live import ReceiverProcess

    backend = CountingBackend()
    r = H.receiver(backend, tmp_path).start()
    other = ReceiverProcess(r.args, r.env, tmp_path)
    try:
        proc = H.spawn(other)
        assert proc.wait(60) == 2
        err = other.stderr.read_text()
        assert "is in use by another otel-loopguard receiver" in err and "must listen on the same address" in err, err
        assert r.proc is not None and r.proc.poll() is None  # the owner goes on
    finally:
        other.stop()
        r.stop()
        backend.down()
