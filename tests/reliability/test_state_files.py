"""The state directory's files (receiver/state/spool.py, receiver/state/directory.py) on their own: what a crash
leaves behind reads back, and what is damaged is set aside without costing the rest."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from otel_loopguard.receiver.config import ConfigError
from otel_loopguard.receiver.ingest.dedupe import CONFLICT, DUPLICATE, NEW
from otel_loopguard.receiver.state.judged import JudgedLog
from otel_loopguard.receiver.state.spool import DELIVERED, JUDGED, Spool
from otel_loopguard.receiver.state.directory import DedupeLog, PersistentDeduper, StateDir


def keys(n: int, salt: int = 0) -> bytes:
    return b"".join(bytes([salt]) * 16 + i.to_bytes(8, "big") for i in range(n))


def test_unacknowledged_records_come_back_in_order_and_acknowledged_ones_do_not(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    assert spool.recover() == []
    refs = [spool.append(f"request {i}".encode(), i + 1, keys(i + 1, i)) for i in range(5)]
    spool.ack(refs[1])
    spool.ack(refs[3])
    # No close(): as after SIGKILL.
    again = Spool(tmp_path).recover()
    assert [r.payload for r in again] == [b"request 0", b"request 2", b"request 4"]
    assert [r.spans for r in again] == [1, 3, 5]
    assert again[1].keys == keys(3, 2)


def test_a_fully_acknowledged_segment_is_deleted_and_the_active_one_rolls(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=100)
    spool.recover()
    refs = [spool.append(b"x" * 80, 1, keys(1)) for _ in range(4)]  # one record a segment
    assert len({r.segment for r in refs}) == 4
    for r in refs[:3]:
        spool.ack(r)
    assert sorted(p.name for p in tmp_path.glob("*.seg")) == [f"{refs[3].segment:08d}.seg"]
    assert Spool(tmp_path).recover()[0].ref == refs[3]


def test_a_torn_last_record_is_a_write_the_crash_cut_short_and_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spool = Spool(tmp_path)
    spool.recover()
    spool.append(b"whole", 1, keys(1))
    ref = spool.append(b"torn away", 1, keys(1, 9))
    segment = tmp_path / f"{ref.segment:08d}.seg"
    segment.write_bytes(segment.read_bytes()[:-5])
    with caplog.at_level(logging.ERROR):
        assert [r.payload for r in Spool(tmp_path).recover()] == [b"whole"]
    assert not caplog.records and segment.exists()  # nothing to report: that sender was never answered


def test_a_damaged_segment_is_set_aside_and_its_readable_records_are_kept(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spool = Spool(tmp_path)
    spool.recover()
    first = spool.append(b"kept", 1, keys(1))
    spool.append(b"damaged", 1, keys(1, 3))
    spool.append(b"after the damage", 1, keys(1, 4))
    segment = tmp_path / f"{first.segment:08d}.seg"
    data = bytearray(segment.read_bytes())
    data[data.index(b"damaged")] ^= 0xFF
    segment.write_bytes(bytes(data))
    with caplog.at_level(logging.ERROR):
        recovered = Spool(tmp_path).recover()
    assert [r.payload for r in recovered] == [b"kept"]
    assert segment.with_suffix(".corrupt").exists() and not segment.exists()
    assert "damaged record" in caplog.text and ".corrupt" in caplog.text
    # The kept record was written again into a live segment: a second restart still has it.
    assert [r.payload for r in Spool(tmp_path).recover()] == [b"kept"]


def test_a_foreign_file_in_the_queue_is_set_aside_not_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "00000001.seg").write_bytes(b"\x80\x04 a pickle, or anything else that is not ours")
    with caplog.at_level(logging.ERROR):
        assert Spool(tmp_path).recover() == []
    assert (tmp_path / "00000001.corrupt").exists()
    assert "does not start as an otel-loopguard queue segment" in caplog.text


def test_dedupe_keys_outlive_the_process_and_expire_with_their_ttl(tmp_path: Path) -> None:
    log = DedupeLog(tmp_path, size=100, ttl_seconds=600)
    assert log.load() == {}
    log.append(keys(3))
    log.close()
    restored = DedupeLog(tmp_path, size=100, ttl_seconds=600).load()
    assert set(restored) == {keys(3)[i:i + 24] for i in range(0, 72, 24)}
    assert DedupeLog(tmp_path, size=100, ttl_seconds=0).load() == {}  # too old: not loaded


def test_dedupe_generations_keep_at_least_the_last_size_keys(tmp_path: Path) -> None:
    log = DedupeLog(tmp_path, size=10, ttl_seconds=600)
    log.load()
    for batch in range(7):
        log.append(keys(4, batch))  # 28 keys through a log of 10 a generation
    log.close()
    restored = DedupeLog(tmp_path, size=10, ttl_seconds=600).load()
    last_ten = {keys(4, b)[i:i + 24] for b in (4, 5, 6) for i in range(0, 96, 24)}
    assert last_ten <= set(restored) and len(restored) <= 20


def test_a_restored_key_is_a_duplicate_whatever_its_content_and_new_keys_still_work(tmp_path: Path) -> None:
    log = DedupeLog(tmp_path, size=100, ttl_seconds=600)
    log.load()
    key = keys(1)
    deduper = PersistentDeduper(100, 600, log, {key: 0}, wall=lambda: 1)
    assert deduper.check(key, 12345) == DUPLICATE  # the content id is a per-process hash: not compared
    other = keys(1, 7)
    assert deduper.check(other, 1) == NEW
    deduper.remember_all([(other, 1)])
    assert deduper.check(other, 2) == CONFLICT
    later = PersistentDeduper(100, 600, log, {key: 0}, wall=lambda: 601 * 10**9)
    assert later.check(key, 1) == NEW  # past its TTL


def test_one_state_directory_serves_one_receiver(tmp_path: Path) -> None:
    first = StateDir(str(tmp_path))
    try:
        with pytest.raises(ConfigError, match="in use by another otel-loopguard receiver"):
            StateDir(str(tmp_path))
    finally:
        first.close()
    StateDir(str(tmp_path)).close()  # released with the first


def test_the_alive_stamp_tells_the_next_process_when_this_one_stopped(tmp_path: Path) -> None:
    first = StateDir(str(tmp_path))
    assert first.previous_alive_ns is None
    first.beat()
    first.close()
    stamp = int.from_bytes((tmp_path / "alive").read_bytes(), "little")
    second = StateDir(str(tmp_path))
    assert second.previous_alive_ns == stamp
    second.close()


def test_a_forward_record_stays_until_delivered_and_judged(tmp_path: Path) -> None:
    spool = Spool(tmp_path, acks=2, segment_bytes=100)
    spool.recover()
    refs = [spool.append(b"x" * 80, 1, keys(1, i)) for i in range(3)]  # one record a segment
    spool.ack(refs[0], DELIVERED)  # delivered, its run still open
    spool.ack(refs[1], JUDGED)  # judged, the downstream still down
    spool.ack(refs[2], DELIVERED)
    spool.ack(refs[2], JUDGED)
    again = {r.ref: (r.delivered, r.judged) for r in Spool(tmp_path, acks=2).recover()}
    assert again == {refs[0]: (True, False), refs[1]: (False, True)}


def test_judged_log_lets_a_request_go_once_every_run_it_fed_completed(tmp_path: Path) -> None:
    spool = Spool(tmp_path, acks=2)
    spool.recover()
    log = JudgedLog(spool, max_tracked=2)
    a, b, c, d = (spool.append(b"r", 1, keys(1, i)) for i in range(4))
    for ref in (a, b, c, d):
        spool.ack(ref, DELIVERED)
    log.fed(a, {"run-1", "run-2"})
    log.fed(b, {"run-2"})
    log.fed(c, set())  # fed no open run: judged at once
    log.completed("run-2")
    log.settle()
    # run-1 is still open (a), d has not been fed yet; b and c are done
    assert {r.ref for r in Spool(tmp_path, acks=2).recover() if not r.judged} == {a, d}
    log.fed(d, {"run-3"})
    log.fed(spool.append(b"r", 1, keys(1, 9)), {"run-4"})  # past max_tracked: the oldest (a) is let go
    assert a not in {r.ref for r in Spool(tmp_path, acks=2).recover() if not r.judged}
