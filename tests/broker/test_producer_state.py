"""The idempotent-producer rules, through the real partition log (real files, no sockets)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rivven_kproto.broker.durable.files import read_offset
from rivven_kproto.broker.durable.work import BlockingWork, run_all
from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.broker.log.producer_state import INT32_MAX, ProducerStateManager, in_sequence
from rivven_kproto.broker.producer_ids import ProducerIdAllocator
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.records.batch import iter_headers
from rivven_kproto.codec.records.records import Record, build_batch

from .log_helpers import NOW, crash, open_log

PID = 1000


def batch(seq: int, count: int = 2, *, pid: int = PID, epoch: int = 0) -> bytes:
    records = [Record(offset_delta=i, timestamp_delta=i, key=None, value=b"v%d" % (seq + i)) for i in range(count)]
    return build_batch(records, base_timestamp=NOW, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def error_of(log: Partition, data: bytes) -> Errors:
    with pytest.raises(KafkaError) as info:
        log.append(data, NOW)
    return info.value.error


def test_in_order_batches_append_and_duplicates_return_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append(batch(0), NOW)
    second = log.append(batch(2), NOW)
    assert (first.base_offset, second.base_offset) == (0, 2)
    again = log.append(batch(0), NOW)
    assert again.duplicate and (again.base_offset, again.last_offset) == (0, 1)
    assert log.log_end_offset == 4
    assert log.producers.duplicates == 1


def test_five_batches_are_cached_and_an_older_duplicate_is_out_of_order(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(6):
        log.append(batch(2 * i), NOW)
    for i in range(1, 6):  # the last five are recognised
        assert log.append(batch(2 * i), NOW).duplicate
    assert error_of(log, batch(0)) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER  # older than the cache
    assert log.log_end_offset == 12


def test_gap_old_epoch_new_epoch_and_unknown_producer(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(0), NOW)
    assert error_of(log, batch(5)) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append(batch(3, pid=PID + 1), NOW).base_offset == 2  # no state here: any sequence starts it
    assert error_of(log, batch(2, epoch=1)) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER  # new epoch not at 0
    assert log.append(batch(0, epoch=1), NOW).base_offset == 4  # epoch bump starting at 0
    assert error_of(log, batch(2, epoch=0)) == Errors.INVALID_PRODUCER_EPOCH
    assert log.append(batch(2, epoch=1), NOW).base_offset == 6
    assert log.log_end_offset == 8  # nothing of the refused batches was written


def test_sequence_wraps_after_int32_max(tmp_path: Path) -> None:
    assert in_sequence(INT32_MAX, 0) and in_sequence(5, 6) and not in_sequence(5, 7)
    log = open_log(tmp_path)
    log.append(batch(0), NOW)
    manager = log.producers
    entry = manager.producers[PID]
    # Pretend the producer already wrote up to the last sequence number.
    last = entry.batches[-1]
    entry.batches.clear()
    entry.batches.append(type(last)(INT32_MAX - 1, INT32_MAX, 0, 1, NOW))
    assert not log.append(batch(0), NOW).duplicate  # 0 follows INT32_MAX


def test_state_survives_clean_restart_and_crash(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(0), NOW)
    log.append(batch(2), NOW)
    log.close()
    log = open_log(tmp_path)  # from the shutdown snapshot
    assert log.append(batch(2), NOW).duplicate
    log.append(batch(4), NOW)
    crash(log)
    log = open_log(tmp_path)  # snapshot + replay of the headers written after it
    assert log.append(batch(4), NOW).duplicate
    assert error_of(log, batch(9)) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append(batch(6), NOW).base_offset == 6


def test_snapshots_at_roll_keep_state_after_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300, retention_ms=1)
    for i in range(10):
        log.append(batch(2 * i), NOW)
    assert len(log.segment_base_offsets) > 2
    assert log.producers.snapshot_offsets()
    log.apply_retention(NOW + 10_000)
    assert log.log_start_offset > 0
    log.close()
    log = open_log(tmp_path, segment_bytes=300)
    assert log.append(batch(18), NOW).duplicate  # still known after old segments went away
    assert log.append(batch(20), NOW).base_offset == 20


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 1)), min_size=1, max_size=25), st.integers(0, 25))
def test_snapshot_plus_tail_replay_equals_full_replay(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[int, int]], snapshot_at: int
) -> None:
    directory = tmp_path_factory.mktemp("replay")
    log = open_log(directory)
    seqs = {PID: 0, PID + 1: 0}
    for i, (count, which) in enumerate(steps):
        pid = PID + which
        log.append(batch(seqs[pid], count, pid=pid), NOW)
        seqs[pid] += count
        if i == snapshot_at:
            log.producers.write_snapshot(log.log_end_offset)
    data = log.read(0, 1 << 20).data
    full = ProducerStateManager(directory / "unused")
    full.update(h for _, h in iter_headers(data))
    crash(log)
    reopened = open_log(directory)
    assert reopened.producers.producers == full.producers


def test_expiration(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(0), NOW)
    assert log.producers.expire(NOW + 1000, 86_400_000) == 0
    assert log.producers.expire(NOW + 86_400_001 + 1, 86_400_000) == 1
    assert log.append(batch(0), NOW).base_offset == 2  # forgotten: the retry is no longer a duplicate


def test_corrupt_snapshot_is_ignored_and_state_rebuilt(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(0), NOW)
    log.close()
    (snapshot,) = tmp_path.glob("*.snapshot")
    snapshot.write_bytes(b"{garbage" + snapshot.read_bytes()[8:])
    log = open_log(tmp_path)
    assert log.append(batch(0), NOW).duplicate


def test_producer_ids_are_never_reused(tmp_path: Path) -> None:
    allocator = ProducerIdAllocator(tmp_path, block_size=10)
    first = [allocator.allocate() for _ in range(3)]
    assert first == [0, 1, 2]
    again = ProducerIdAllocator(tmp_path, block_size=10)  # a restart skips the rest of the block
    assert again.allocate() == 10
    assert len({*first, *(again.allocate() for _ in range(20))}) == 23


def test_the_next_producer_id_block_is_reserved_by_the_flusher(tmp_path: Path) -> None:
    work = BlockingWork()
    allocator = ProducerIdAllocator(tmp_path, block_size=10, work=work)
    assert read_offset(tmp_path / "producer-ids") == 10  # the first block, at open
    assert [allocator.allocate() for _ in range(5)] == [0, 1, 2, 3, 4]
    assert len(work) == 0
    allocator.allocate()  # half of the block is used: the next one is requested, not written
    assert len(work) == 1 and read_offset(tmp_path / "producer-ids") == 10
    run_all(work.take())
    assert read_offset(tmp_path / "producer-ids") == 20
    ids = [allocator.allocate() for _ in range(20)]  # a burst past the queued reservation
    assert ids == list(range(6, 26)) and read_offset(tmp_path / "producer-ids") >= 26
    run_all(work.take())  # a late reservation never lowers the reserved end
    assert read_offset(tmp_path / "producer-ids") >= 26
    assert ProducerIdAllocator(tmp_path, block_size=10).allocate() >= 26


def test_aborted_between_against_a_brute_force_scan_and_trimmed_by_retention(tmp_path: Path) -> None:
    """Interleaved transactions of three producers, a third of them aborted; the bisected lookup
    equals the full scan for every window, and deleting old segments forgets old aborts."""
    log = open_log(tmp_path, segment_bytes=2_000)
    pids = [PID, PID + 1, PID + 2]
    sequences = dict.fromkeys(pids, 0)
    for round_ in range(30):
        for pid in pids:
            for _ in range(1 + (round_ + pid) % 3):
                log.append(build_batch([Record(offset_delta=0, timestamp_delta=0, key=None, value=b"x")],
                                       base_timestamp=NOW, producer_id=pid, producer_epoch=0,
                                       base_sequence=sequences[pid], is_transactional=True), NOW)
                sequences[pid] += 1
        for pid in pids:
            log.append_marker(pid, 0, (round_ + pid) % 3 != 0, 0, NOW)
    aborted = list(log.producers.aborted)
    assert len(aborted) == 30 and [a.last_offset for a in aborted] == sorted(a.last_offset for a in aborted)
    end = log.log_end_offset
    for start in range(0, end, 7):
        for stop in (start + 1, start + 13, end):
            expected = [a for a in aborted if a.last_offset >= start and a.first_offset < stop]
            assert log.producers.aborted_between(start, stop) == expected
    cut = aborted[10].last_offset + 1
    log.delete_records(cut)
    kept = [a for a in aborted if a.last_offset >= log.log_start_offset]
    assert log.log_start_offset > aborted[0].last_offset and log.producers.aborted == kept
    log.close()
    assert open_log(tmp_path, segment_bytes=2_000).producers.aborted == kept


def test_a_marker_voids_a_verification_begun_before_it(tmp_path: Path) -> None:
    """KIP-890 on a leader that asks the coordinator: the answer counts only if no marker of the
    producer landed while it was asked; an open transaction here needs no question."""
    state = ProducerStateManager(tmp_path)
    assert state.needs_verification(7, 0, "t")
    guard = state.start_verification(7)
    assert state.still_verified(7, guard)
    assert state.start_verification(7) is guard  # a second request in flight shares it
    state.complete_txn(7, 0, marker_offset=0, commit=False)
    assert not state.still_verified(7, guard)
    second = state.start_verification(7)
    assert state.still_verified(7, second) and not state.still_verified(7, guard)
    batch = build_batch([Record(0, 0, None, b"v", [])], producer_id=7, producer_epoch=0, base_sequence=0,
                        is_transactional=True)
    state.update(header for _, header in iter_headers(batch))
    assert state.needs_verification(7, 0, "t")  # open here, but no transactional id confirmed for it yet
    state.verified_ids[7] = "t"  # the coordinator's answer, applied by the Produce handler
    assert not state.needs_verification(7, 0, "t")  # its transaction is open here now
    assert state.needs_verification(7, 0, "attacker")  # #37: the same producer under another id is asked about
    assert state.needs_verification(7, 1, "t")  # a new epoch (transactions V2: a new transaction)
    state.complete_txn(7, 0, marker_offset=2, commit=True)
    assert state.needs_verification(7, 0, "t")
