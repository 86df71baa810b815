"""SIGKILL at the moments that matter for duplicates (issue 27), with real processes and a counting
backend, `serve --forward ... --state-dir DIR`:

- A request the sender re-sends after the crash is stored once, even when the crash came after
  the request was written to the forward queue on disk and before its keys reached the dedupe
  log: the queue's record carries the keys (receiver/state/spool.py).
- The one window no receiver closes: the downstream took a request and the crash came before
  its answer was recorded on disk. The next process sends it again (at least once: never lost),
  and says so at start. This is the batch a SIGKILL under load stored twice; the control, a kill
  once the delivery was recorded, stores every span once.
"""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from collector import scenarios as S
from collector.backend import CountingBackend
from live import ReceiverProcess, wait_until

from . import handmade
from .test_restarts import delivered_on_disk, spans_of

ANSWER_SECONDS = 3.0  # the slow backend's answer, after it stored the spans (under the 5 s attempt)


class StoresThenAnswersLate(CountingBackend):
    """A backend that stores each request at once and answers it ANSWER_SECONDS later: the
    receiver can be killed between the two."""

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
        answer = super().Export(request, context)
        time.sleep(ANSWER_SECONDS)
        return answer


@pytest.fixture()
def slow_backend() -> Iterator[StoresThenAnswersLate]:
    b = StoresThenAnswersLate()
    yield b
    b.down()


def start(backend: CountingBackend, tmp_path: Path) -> ReceiverProcess:
    args = ["--forward", backend.address, "--state-dir", str(tmp_path / "state"), "--idle-timeout-seconds", "60"]
    return ReceiverProcess(args, S.receiver_env(), tmp_path).start()


def test_a_resend_after_a_crash_before_the_dedupe_log_is_stored_once(backend: CountingBackend,
                                                                     tmp_path: Path) -> None:
    backend.down()  # the requests stay in the queue on disk, undelivered
    r = start(backend, tmp_path)
    try:
        payloads = handmade.many(3)
        S.send_raw(r.port, payloads)
        r.stop(signal.SIGKILL)
        # The crash came before the dedupe log was written: only the queue's records know the keys.
        shutil.rmtree(tmp_path / "state" / "dedupe")
        r.start()
        S.send_raw(r.port, payloads)  # the sender never heard our answer: it sends them again
        backend.up()
        wanted = spans_of(payloads)
        wait_until(lambda: wanted <= set(backend.app_counts()), 30, "the queued spans delivered", explain=r.logs)
        marker = handmade.many(1)
        S.send_raw(r.port, marker)
        wait_until(lambda: spans_of(marker) <= set(backend.app_counts()), 20, "the marker delivered", explain=r.logs)
        time.sleep(1.0)
        counts = backend.app_counts()
        assert {counts[k] for k in wanted} == {1}, r.logs()
    finally:
        r.stop()


@pytest.mark.parametrize("recorded", [False, True], ids=["killed-before-the-answer", "control-killed-after"])
def test_a_crash_while_the_downstream_answers_sends_that_request_again(slow_backend: StoresThenAnswersLate,
                                                                       tmp_path: Path, recorded: bool) -> None:
    r = start(slow_backend, tmp_path)
    try:
        payloads = handmade.many(1, spans_each=50)
        wanted = spans_of(payloads)
        S.send_raw(r.port, payloads)
        wait_until(lambda: wanted <= set(slow_backend.app_counts()), 20, "the backend stored the request",
                   explain=r.logs)
        if recorded:
            wait_until(lambda: delivered_on_disk(tmp_path / "state") >= 1, 20, "the delivery recorded",
                       explain=r.logs)
        r.stop(signal.SIGKILL)
        r.start()
        marker = handmade.many(1)
        S.send_raw(r.port, marker)
        wait_until(lambda: spans_of(marker) <= set(slow_backend.app_counts()), 30, "the marker delivered",
                   explain=r.logs)
        time.sleep(1.0)
        counts = slow_backend.app_counts()
        assert {counts[k] for k in wanted} == ({1} if recorded else {2}), r.logs()
        said = "may reach it a second time" in r.logs()
        assert said != recorded, r.logs()
    finally:
        r.stop()
