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
    assert row["refused_connects"] == 0, row  # the app never found the port closed
    assert row["old_exit"] == 0, row
    restored = [int(n) for n in re.findall(r"(\d+) open runs restored from the last shutdown", logs)]
    assert restored and max(restored) > 0, logs  # runs were open across the handover...
    assert row["loops_stopped"] == row["loops"] and row["loops_missed"] == 0, row  # ...and judged whole
    assert row["runs_incomplete"] == 0 and row["cut_passing"] == 0 and row["unjudged"] == 0, row
    assert "Traceback" not in logs, logs


def test_sigkill_and_an_immediate_restart_lose_no_span(tmp_path: Path) -> None:
    row = H.run(tmp_path, "kill-start", **LOAD)
    assert row["lost"] == 0 and row["duplicated"] == 0, row
    assert row["loops_missed"] == 0, row


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
