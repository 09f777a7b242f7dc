"""The transaction coordinator (real write-ahead log on disk, markers recorded by a fake writer),
and the last stable offset / aborted-transaction index of a real partition log."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from pathlib import Path

import pytest
import xxhash

from rivven_kproto.broker.durable.log import DurableLog, scan
from rivven_kproto.broker.durable.work import BlockingWork
from rivven_kproto.broker.log.partition import Partition as PartitionOfLog
from rivven_kproto.broker.log.producer_state import AbortedTxn
from rivven_kproto.broker.producer_ids import ProducerIdAllocator
from rivven_kproto.broker.txn import coordinator as coordinator_module
from rivven_kproto.broker.txn.coordinator import MAX_EPOCH, TransactionCoordinator
from rivven_kproto.broker.txn.effects import AwaitSync
from rivven_kproto.broker.txn.state import TxnMetadata, TxnState
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.records.batch import iter_headers
from rivven_kproto.codec.records.records import Record, build_batch

from .log_helpers import NOW, crash, make_batch, open_log

TID = "txn-a"
TIMEOUT = 60_000
T1, T2, T3 = ("t", 0), ("t", 1), ("u", 0)

Partition = tuple[str, int]


class Markers:
    """A marker writer that records calls and fails the partitions in ``failing``."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, bool, tuple[Partition, ...]]] = []
        self.failing: set[Partition] = set()

    def __call__(
        self, pid: int, epoch: int, commit: bool, partitions: Iterable[Partition], now_ms: int
    ) -> set[Partition]:
        todo = tuple(partitions)
        self.calls.append((pid, epoch, commit, todo))
        return {p for p in todo if p in self.failing}


class Setup:
    """One coordinator over ``tmp_path``; ``restart()`` builds a new one on the same files."""

    def __init__(self, path: Path, **kwargs: int) -> None:
        self.path = path
        self.kwargs = kwargs
        self.markers = Markers()
        self.coord = self.restart()

    def restart(self, markers: Markers | None = None) -> TransactionCoordinator:
        if markers is not None:
            self.markers = markers
        ids = ProducerIdAllocator(self.path, block_size=10)
        self.coord = TransactionCoordinator(
            DurableLog(self.path / "txn", "txn"), ids.allocate, self.markers, **self.kwargs
        )
        self.coord.recover(NOW)
        return self.coord

    def init(
        self, tid: str = TID, pid: int = -1, epoch: int = -1, timeout: int = TIMEOUT, now: int = NOW
    ) -> tuple[Errors, int, int]:
        return self.coord.init_producer_id(tid, timeout, pid, epoch, now)

    def ready(self, tid: str = TID, timeout: int = TIMEOUT) -> tuple[int, int]:
        error, pid, epoch = self.init(tid, timeout=timeout)
        assert error == Errors.NONE
        return pid, epoch

    def state(self, tid: str = TID) -> TxnMetadata:
        return self.coord.txns[tid]


@pytest.fixture
def s(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


# -- InitProducerId ---------------------------------------------------------------------------------


def test_init_allocates_then_bumps_the_epoch_and_fences_the_old_instance(s: Setup) -> None:
    pid, epoch = s.ready()
    assert epoch == 0 and s.state().state is TxnState.EMPTY
    again = s.init()
    assert again == (Errors.NONE, pid, 1)
    # A new instance clears the last epoch (Kafka): the old instance cannot claim the new epoch
    # through a KIP-360 "retry".
    assert (s.state().last_producer_id, s.state().last_producer_epoch) == (pid, -1)
    assert s.init(pid=pid, epoch=0)[0] == Errors.PRODUCER_FENCED
    # The first instance is fenced everywhere.
    assert s.coord.add_partitions(TID, pid, 0, [T1], NOW) == Errors.PRODUCER_FENCED
    assert s.coord.end_txn(TID, pid, 0, True, NOW) == Errors.PRODUCER_FENCED
    assert s.coord.add_offsets(TID, pid, 0, "g", NOW) == Errors.PRODUCER_FENCED
    assert s.coord.add_partitions(TID, pid, 1, [T1], NOW) == Errors.NONE


def test_init_argument_errors(s: Setup) -> None:
    assert s.init(timeout=0)[0] == Errors.INVALID_TRANSACTION_TIMEOUT
    assert s.init(timeout=-5)[0] == Errors.INVALID_TRANSACTION_TIMEOUT
    assert s.init(timeout=900_001)[0] == Errors.INVALID_TRANSACTION_TIMEOUT  # default max 900000
    assert s.init(timeout=900_000)[0] == Errors.NONE
    assert s.init(tid="")[0] == Errors.INVALID_REQUEST
    assert TID in s.coord.txns and "" not in s.coord.txns


def test_max_timeout_is_configurable(tmp_path: Path) -> None:
    s = Setup(tmp_path, max_timeout_ms=5000)
    assert s.init(timeout=5001)[0] == Errors.INVALID_TRANSACTION_TIMEOUT
    assert s.init(timeout=5000)[0] == Errors.NONE


def test_unknown_id_and_wrong_producer_id_are_invalid_mapping(s: Setup) -> None:
    pid, epoch = s.ready()
    other_pid, _ = s.ready("txn-b")
    assert s.coord.add_partitions("nobody", pid, epoch, [T1], NOW) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert s.coord.add_partitions(TID, other_pid, epoch, [T1], NOW) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert s.coord.end_txn(TID, other_pid, epoch, True, NOW) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert s.coord.end_txn("nobody", pid, epoch, False, NOW) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert s.coord.add_offsets("nobody", pid, epoch, "g", NOW) == Errors.INVALID_PRODUCER_ID_MAPPING


# -- the transaction life cycle ---------------------------------------------------------------------


def test_commit_and_abort_cycle_with_retries(s: Setup) -> None:
    pid, epoch = s.ready()
    assert s.coord.end_txn(TID, pid, epoch, True, NOW) == Errors.INVALID_TXN_STATE  # nothing begun
    assert s.coord.add_partitions(TID, pid, epoch, [T1, T2], NOW + 5) == Errors.NONE
    txn = s.state()
    assert txn.state is TxnState.ONGOING and txn.partitions == {T1, T2} and txn.start_ms == NOW + 5
    assert s.coord.add_partitions(TID, pid, epoch, [T1], NOW + 9) == Errors.NONE  # already in: no change
    assert s.coord.add_partitions(TID, pid, epoch, [T3], NOW + 9) == Errors.NONE
    assert s.state().partitions == {T1, T2, T3} and s.state().start_ms == NOW + 5
    assert s.coord.active == 1 and s.coord.counters.started == 1

    assert s.coord.end_txn(TID, pid, epoch, True, NOW + 10) == Errors.NONE
    assert s.markers.calls == [(pid, epoch, True, (T1, T2, T3))]
    txn = s.state()
    assert txn.state is TxnState.COMPLETE_COMMIT and txn.partitions == frozenset()
    assert s.coord.counters.committed == 1 and s.coord.active == 0
    # A retried commit is answered NONE without writing anything. An abort now is of a next
    # transaction whose AddPartitionsToTxn never got here (librdkafka sends it after a failed
    # add): nothing to abort, NONE, and nothing written or changed either.
    assert s.coord.end_txn(TID, pid, epoch, True, NOW + 11) == Errors.NONE
    assert s.coord.end_txn(TID, pid, epoch, False, NOW + 11) == Errors.NONE
    assert len(s.markers.calls) == 1 and s.state().state is TxnState.COMPLETE_COMMIT

    # The next transaction starts with only its own partitions.
    assert s.coord.add_partitions(TID, pid, epoch, [T2], NOW + 20) == Errors.NONE
    assert s.state().partitions == {T2} and s.state().start_ms == NOW + 20
    assert s.coord.counters.started == 2
    assert s.coord.end_txn(TID, pid, epoch, False, NOW + 30) == Errors.NONE
    assert s.markers.calls[-1] == (pid, epoch, False, (T2,))
    assert s.state().state is TxnState.COMPLETE_ABORT
    assert s.coord.end_txn(TID, pid, epoch, False, NOW + 31) == Errors.NONE
    assert s.coord.end_txn(TID, pid, epoch, True, NOW + 31) == Errors.INVALID_TXN_STATE
    assert s.coord.counters.aborted == 1 and len(s.markers.calls) == 2


def test_add_offsets_joins_groups_and_completes_them(s: Setup) -> None:
    completed: list[tuple[int, frozenset[str], bool]] = []
    s.coord.complete_groups = lambda pid, groups, commit: completed.append((pid, groups, commit))
    pid, epoch = s.ready()
    assert s.coord.add_offsets(TID, pid, epoch, "g1", NOW) == Errors.NONE
    assert s.state().state is TxnState.ONGOING and s.state().groups == {"g1"}
    assert s.coord.add_offsets(TID, pid, epoch, "g1", NOW) == Errors.NONE
    assert s.coord.add_partitions(TID, pid, epoch, [T1], NOW) == Errors.NONE
    assert s.coord.end_txn(TID, pid, epoch, True, NOW) == Errors.NONE
    assert completed == [(pid, frozenset({"g1"}), True)]
    assert s.state().groups == frozenset()


def test_verify_partition_is_kip_890_part_1(s: Setup) -> None:
    pid, epoch = s.ready()
    assert s.coord.verify_partition(TID, pid, epoch, *T1) == Errors.TRANSACTION_ABORTABLE  # no transaction
    assert s.coord.verify_partition(TID, pid + 99, 0, *T1) == Errors.INVALID_PRODUCER_ID_MAPPING  # another producer
    assert s.coord.verify_partition("someone-else", pid, epoch, *T1) == Errors.INVALID_PRODUCER_ID_MAPPING
    s.coord.add_partitions(TID, pid, epoch, [T1], NOW)
    assert s.coord.verify_partition(TID, pid, epoch, *T1) == Errors.NONE
    # #37: the producer's id and epoch under another transactional id do not join its transaction.
    assert s.coord.verify_partition("attacker", pid, epoch, *T1) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert s.coord.verify_partition(TID, pid, epoch, *T2) == Errors.TRANSACTION_ABORTABLE  # not added
    s.coord.end_txn(TID, pid, epoch, True, NOW)
    assert s.coord.verify_partition(TID, pid, epoch, *T1) == Errors.TRANSACTION_ABORTABLE  # completed
    _, new_epoch = s.ready()
    s.coord.add_partitions(TID, pid, new_epoch, [T1], NOW)
    assert s.coord.verify_partition(TID, pid, epoch, *T1) == Errors.INVALID_PRODUCER_EPOCH  # fenced epoch


def test_verify_partitions_counts_the_offsets_partition_of_an_added_group(s: Setup) -> None:
    """A group coordinator on another broker verifies a V1 TxnOffsetCommit: the group's offsets
    partition is in the transaction once AddOffsetsToTxn added the group, and only while it is
    ongoing (a TxnOffsetCommit retried after the end would leave offsets no marker resolves)."""
    shards = {"g": 7, "h": 3}

    def offsets_partition(group: str) -> Partition:
        return ("__consumer_offsets", shards[group])

    def verify(pid: int, epoch: int, shard: int) -> Errors:
        partition = ("__consumer_offsets", shard)
        return s.coord.verify_partitions(TID, pid, epoch, [partition], offsets_partition)[partition]

    pid, epoch = s.ready()
    assert verify(pid, epoch, 7) == Errors.TRANSACTION_ABORTABLE  # no transaction yet
    assert s.coord.add_offsets(TID, pid, epoch, "g", NOW) == Errors.NONE
    assert verify(pid, epoch, 7) == Errors.NONE
    assert verify(pid, epoch, 3) == Errors.TRANSACTION_ABORTABLE  # another shard's groups were not added
    partition = ("__consumer_offsets", 7)
    assert s.coord.verify_partitions(TID, pid, epoch, [partition]) == {partition: Errors.TRANSACTION_ABORTABLE}
    assert s.coord.end_txn(TID, pid, epoch, False, NOW) == Errors.NONE
    assert verify(pid, epoch, 7) == Errors.TRANSACTION_ABORTABLE  # over: a late retry is refused
    assert s.coord.add_offsets(TID, pid, epoch, "g", NOW) == Errors.NONE
    assert s.init() == (Errors.CONCURRENT_TRANSACTIONS, -1, -1)  # a new instance aborts it, fencing
    assert verify(pid, epoch, 7) == Errors.PRODUCER_FENCED


def test_reinit_during_ongoing_aborts_fences_and_answers_concurrent(s: Setup) -> None:
    pid, epoch = s.ready()
    s.coord.add_partitions(TID, pid, epoch, [T1, T2], NOW)
    assert s.init() == (Errors.CONCURRENT_TRANSACTIONS, -1, -1)
    # The open transaction was aborted with the bumped epoch, so its markers fence the old producer.
    assert s.markers.calls == [(pid, epoch + 1, False, (T1, T2))]
    assert s.state().state is TxnState.COMPLETE_ABORT and s.state().producer_epoch == epoch + 1
    assert s.coord.end_txn(TID, pid, epoch, True, NOW) == Errors.PRODUCER_FENCED
    assert s.coord.verify_partition(TID, pid, epoch, *T1) == Errors.INVALID_PRODUCER_EPOCH
    # The client retries and gets a further bumped epoch.
    assert s.init() == (Errors.NONE, pid, epoch + 2)
    assert s.coord.counters.aborted == 1


def test_epoch_exhaustion_rotates_the_producer_id(s: Setup) -> None:
    pid, _ = s.ready()
    # Pretend many restarts happened: the id's epoch is one short of the last usable one.
    s.coord.log.append(json.dumps(s.state().evolve(producer_epoch=MAX_EPOCH - 1).to_json()).encode())
    s.restart()
    assert s.init() == (Errors.NONE, pid, MAX_EPOCH)
    # The producer asks to bump its exhausted epoch (KIP-360): a new producer id.
    error, new_pid, new_epoch = s.init(pid=pid, epoch=MAX_EPOCH)
    assert error == Errors.NONE and new_pid != pid and new_epoch == 0
    txn = s.state()
    assert (txn.last_producer_id, txn.last_producer_epoch) == (pid, MAX_EPOCH)
    assert s.coord.by_producer[new_pid] == TID
    # KIP-360 retry of the rotating call (its response was lost): same answer, no new id.
    assert s.init(pid=pid, epoch=MAX_EPOCH) == (Errors.NONE, new_pid, 0)
    assert s.coord.add_partitions(TID, pid, MAX_EPOCH, [T1], NOW) == Errors.INVALID_PRODUCER_ID_MAPPING
    # A new instance rotating an exhausted id records no last epoch to retry with.
    s.coord.log.append(json.dumps(s.state().evolve(producer_epoch=MAX_EPOCH).to_json()).encode())
    s.restart()
    error, third_pid, epoch = s.init()
    assert error == Errors.NONE and third_pid not in (pid, new_pid) and epoch == 0
    assert (s.state().last_producer_id, s.state().last_producer_epoch) == (new_pid, -1)
    assert s.init(pid=new_pid, epoch=MAX_EPOCH)[0] == Errors.PRODUCER_FENCED


def test_rotated_producer_id_cannot_write_into_the_new_transaction(s: Setup) -> None:
    """A zombie still holding the exhausted producer id must not pass KIP-890 verification: its
    batches would open a transaction under the old id that no marker ever closes (LSO stuck)."""
    pid, _ = s.ready()
    s.coord.log.append(json.dumps(s.state().evolve(producer_epoch=MAX_EPOCH).to_json()).encode())
    s.restart()
    _, new_pid, new_epoch = s.init()
    assert new_pid != pid
    assert s.coord.add_partitions(TID, new_pid, new_epoch, [T1], NOW) == Errors.NONE
    assert s.coord.verify_partition(TID, new_pid, new_epoch, *T1) == Errors.NONE
    assert s.coord.verify_partition(TID, pid, MAX_EPOCH, *T1) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert pid not in s.coord.by_producer


def test_epoch_exhaustion_while_ongoing_aborts_under_the_same_producer_id(s: Setup) -> None:
    """The fencing abort must close the transaction the producer id opened: its markers carry that
    producer id (a new id's markers would leave the old transaction open and the LSO stuck)."""
    pid, _ = s.ready()
    s.coord.log.append(json.dumps(s.state().evolve(producer_epoch=MAX_EPOCH).to_json()).encode())
    s.restart()
    assert s.coord.add_partitions(TID, pid, MAX_EPOCH, [T1], NOW) == Errors.NONE
    assert s.init()[0] == Errors.CONCURRENT_TRANSACTIONS
    ((abort_pid, abort_epoch, commit, parts),) = s.markers.calls
    assert (abort_pid, abort_epoch, commit, parts) == (pid, MAX_EPOCH + 1, False, (T1,))
    # The retry rotates the exhausted id.
    error, new_pid, new_epoch = s.init()
    assert error == Errors.NONE and new_pid != pid and new_epoch == 0


def test_kip_360_recovery(s: Setup) -> None:
    pid, epoch = s.ready()
    # The producer asks for a bump of its own epoch (after an abortable error): granted.
    assert s.init(pid=pid, epoch=epoch) == (Errors.NONE, pid, epoch + 1)
    # The same request retried (lost response): the same answer, not a second bump.
    assert s.init(pid=pid, epoch=epoch) == (Errors.NONE, pid, epoch + 1)
    # An older epoch or another producer id is fenced.
    assert s.init(pid=pid, epoch=epoch + 7)[0] == Errors.PRODUCER_FENCED
    assert s.init(pid=pid + 1, epoch=epoch + 1)[0] == Errors.PRODUCER_FENCED
    assert s.init(pid=pid, epoch=epoch + 1) == (Errors.NONE, pid, epoch + 2)
    assert s.state().state is TxnState.EMPTY


def test_kip_360_after_aborted_transaction(s: Setup) -> None:
    pid, epoch = s.ready()
    s.coord.add_partitions(TID, pid, epoch, [T1], NOW)
    assert s.coord.end_txn(TID, pid, epoch, False, NOW) == Errors.NONE
    assert s.init(pid=pid, epoch=epoch) == (Errors.NONE, pid, epoch + 1)
    assert s.coord.add_partitions(TID, pid, epoch + 1, [T2], NOW) == Errors.NONE
    assert s.state().partitions == {T2}


def test_verify_partition_refuses_an_epoch_never_handed_out(s: Setup) -> None:
    pid, epoch = s.ready()
    assert s.coord.add_partitions(TID, pid, epoch, [T1], NOW) == Errors.NONE
    assert s.coord.verify_partition(TID, pid, epoch, *T1) == Errors.NONE
    assert s.coord.verify_partition(TID, pid, epoch + 1, *T1) == Errors.INVALID_PRODUCER_EPOCH


def marker_epochs(s: Setup) -> set[int]:
    return {epoch for _, epoch, _, _ in s.markers.calls}


@pytest.mark.parametrize("how", ["new-instance", "kip-360", "timeout"])
def test_the_fencing_epoch_of_an_abort_is_never_handed_out(s: Setup, how: str) -> None:
    """Issue #14: an epoch a fencing ABORT marker used must never be given to a producer, or its
    first batch in that epoch could be matched against state the marker left behind."""
    pid, epoch = s.ready()
    assert s.coord.add_partitions(TID, pid, epoch, [T1], NOW) == Errors.NONE
    if how == "timeout":
        s.coord.tick(NOW + TIMEOUT + 1)
    else:
        expected = (pid, epoch) if how == "kip-360" else (-1, -1)
        assert s.init(pid=expected[0], epoch=expected[1])[0] == Errors.CONCURRENT_TRANSACTIONS
    assert marker_epochs(s) == {epoch + 1}
    # A KIP-360 retry with the fenced epoch is fenced (Kafka: lastProducerEpoch was cleared).
    assert s.init(pid=pid, epoch=epoch) == (Errors.PRODUCER_FENCED, -1, -1)
    # A new instance gets an epoch beyond the marker's.
    error, new_pid, new_epoch = s.init()
    assert (error, new_pid) == (Errors.NONE, pid) and new_epoch == epoch + 2
    # ...and the same after a restart (the state came back from the log).
    s.restart()
    assert s.init(pid=pid, epoch=epoch + 1)[0] == Errors.PRODUCER_FENCED
    assert s.init(pid=pid, epoch=new_epoch) == (Errors.NONE, pid, new_epoch + 1)
    assert s.init(pid=pid, epoch=new_epoch) == (Errors.NONE, pid, new_epoch + 1)  # retried bump


# -- time -------------------------------------------------------------------------------------------


def test_timeout_aborts_and_bumps_the_epoch(s: Setup) -> None:
    pid, epoch = s.ready(timeout=1000)
    s.coord.add_partitions(TID, pid, epoch, [T1, T3], NOW)
    s.coord.tick(NOW + 1000)
    assert s.state().state is TxnState.ONGOING and s.markers.calls == []
    s.coord.tick(NOW + 1001)
    assert s.markers.calls == [(pid, epoch + 1, False, (T1, T3))]
    txn = s.state()
    assert txn.state is TxnState.COMPLETE_ABORT and txn.producer_epoch == epoch + 1
    assert s.coord.counters.timed_out == 1 and s.coord.counters.aborted == 1
    # The silent producer is fenced when it comes back, also through the KIP-360 form.
    assert s.coord.end_txn(TID, pid, epoch, True, NOW + 2000) == Errors.PRODUCER_FENCED
    assert s.coord.add_partitions(TID, pid, epoch, [T1], NOW + 2000) == Errors.PRODUCER_FENCED
    assert s.init(pid=pid, epoch=epoch)[0] == Errors.PRODUCER_FENCED
    # A new instance takes over normally.
    assert s.init() == (Errors.NONE, pid, epoch + 2)
    s.coord.tick(NOW + 10_000)
    assert len(s.markers.calls) == 1


def test_timeout_counts_from_the_start_of_the_transaction(s: Setup) -> None:
    pid, epoch = s.ready(timeout=1000)
    s.coord.add_partitions(TID, pid, epoch, [T1], NOW)
    s.coord.add_partitions(TID, pid, epoch, [T2], NOW + 900)  # adding does not restart the clock
    s.coord.tick(NOW + 1001)
    assert s.state().state is TxnState.COMPLETE_ABORT


def test_idle_transactional_ids_expire(tmp_path: Path) -> None:
    s = Setup(tmp_path, id_expiration_ms=10_000)
    pid, epoch = s.ready()
    s.coord.add_partitions(TID, pid, epoch, [T1], NOW)
    s.coord.tick(NOW + 50_000)  # ongoing (and timed out later, at 60 s): never expired
    assert TID in s.coord.txns
    s.coord.end_txn(TID, pid, epoch, True, NOW + 50_000)
    s.coord.tick(NOW + 60_000)
    assert TID in s.coord.txns
    s.coord.tick(NOW + 60_001)
    assert TID not in s.coord.txns and pid not in s.coord.by_producer
    s.restart()
    assert TID not in s.coord.txns
    error, new_pid, new_epoch = s.init()
    assert error == Errors.NONE and new_pid != pid and new_epoch == 0



def test_an_id_active_again_expires_after_the_ids_idle_since_before(tmp_path: Path) -> None:
    """The expiry walk goes from the oldest transition on and stops at the first idle id that has
    not expired: an id that transacted again must move behind the ones idle since before, also
    across a compaction and a restart (the snapshot and its replay keep that order)."""
    s = Setup(tmp_path, id_expiration_ms=10_000)
    first = s.ready("first")  # Empty at NOW
    s.ready("second")  # Empty at NOW
    s.coord.add_partitions("first", *first, [T1], NOW + 5_000)
    assert s.coord.end_txn("first", *first, True, NOW + 5_000) == Errors.NONE  # CompleteCommit at NOW + 5 s
    assert list(s.coord.txns) == ["second", "first"]
    s.coord.log.roll(s.coord._snapshot())
    s.restart()
    assert list(s.coord.txns) == ["second", "first"]
    s.coord.tick(NOW + 10_001)
    assert "second" not in s.coord.txns and "first" in s.coord.txns
    s.coord.tick(NOW + 15_001)
    assert "first" not in s.coord.txns


def test_the_clock_walks_in_flight_transactions_only(s: Setup) -> None:
    """Ongoing and prepared transactions are indexed apart (the timers' scan and the metrics'
    count walk them, not every id); completed, fenced and expired ones leave the index."""
    pid, epoch = s.ready()
    s.ready("idle")
    assert s.coord.in_flight == {} and s.coord.active == 0
    s.coord.add_partitions(TID, pid, epoch, [T1], NOW)
    assert list(s.coord.in_flight) == [TID] and s.coord.active == 1
    s.markers.failing = {T1}
    assert s.coord.end_txn(TID, pid, epoch, True, NOW) == Errors.NONE
    assert s.coord.in_flight[TID].state is TxnState.PREPARE_COMMIT
    s.restart()
    assert list(s.coord.in_flight) == [TID]  # rebuilt by the replay; the marker still fails
    s.markers.failing = set()
    s.coord.tick(NOW + 1)
    assert s.state().state is TxnState.COMPLETE_COMMIT and s.coord.in_flight == {}

# -- failures ---------------------------------------------------------------------------------------


def test_failed_marker_stays_prepare_and_tick_retries_without_aborting(s: Setup) -> None:
    pid, epoch = s.ready(timeout=1000)
    s.coord.add_partitions(TID, pid, epoch, [T1, T2, T3], NOW)
    s.markers.failing = {T2}
    assert s.coord.end_txn(TID, pid, epoch, True, NOW) == Errors.NONE  # the decision is logged
    assert s.state().state is TxnState.PREPARE_COMMIT
    # While prepared: the client's calls wait; an abort (of a next transaction that has nothing
    # here) waits for the markers too, it never turns the commit into an abort.
    assert s.coord.end_txn(TID, pid, epoch, True, NOW) == Errors.CONCURRENT_TRANSACTIONS
    assert s.coord.end_txn(TID, pid, epoch, False, NOW) == Errors.CONCURRENT_TRANSACTIONS
    assert s.coord.add_partitions(TID, pid, epoch, [T1], NOW) == Errors.CONCURRENT_TRANSACTIONS
    assert s.coord.add_offsets(TID, pid, epoch, "g", NOW) == Errors.CONCURRENT_TRANSACTIONS
    assert s.init() == (Errors.CONCURRENT_TRANSACTIONS, -1, -1)
    # Long past the timeout, still failing: retried as a commit, never turned into an abort.
    s.coord.tick(NOW + 5000)
    assert s.state().state is TxnState.PREPARE_COMMIT
    assert s.markers.calls[-1] == (pid, epoch, True, (T2,))
    s.markers.failing = set()
    s.coord.tick(NOW + 6000)
    assert s.markers.calls[-1] == (pid, epoch, True, (T2,))  # only what was missing
    assert all(commit for _, _, commit, _ in s.markers.calls)
    assert s.state().state is TxnState.COMPLETE_COMMIT
    assert s.coord.counters.committed == 1 and s.coord.counters.timed_out == 0
    assert s.coord.end_txn(TID, pid, epoch, True, NOW) == Errors.NONE


def test_markers_failing_again_and_again_are_warned_about_once_per_interval(
        s: Setup, caplog: pytest.LogCaptureFixture) -> None:
    pid, epoch = s.ready()
    s.coord.add_partitions(TID, pid, epoch, [T1], NOW)
    s.markers.failing = {T1}
    assert s.coord.end_txn(TID, pid, epoch, True, NOW) == Errors.NONE
    interval = coordinator_module.MARKER_WARNING_INTERVAL_MS
    with caplog.at_level("WARNING", logger=coordinator_module.__name__):
        for step in range(1, 2 * interval // 200 + 1):  # a retry every 200 ms for two intervals
            s.coord.retry_unwritten(NOW + step * 200)
    warnings = [r for r in caplog.records if "not written yet" in r.getMessage()]
    assert len(warnings) == 2
    s.markers.failing = set()
    s.coord.retry_unwritten(NOW + 3 * interval)
    assert s.state().state is TxnState.COMPLETE_COMMIT


def test_failed_log_write_changes_nothing(s: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    pid, epoch = s.ready()
    before = s.state()

    def broken(entry: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(s.coord.log, "append", broken)
    assert s.coord.add_partitions(TID, pid, epoch, [T1], NOW) == Errors.COORDINATOR_NOT_AVAILABLE
    assert s.init()[0] == Errors.COORDINATOR_NOT_AVAILABLE
    assert s.init("txn-new")[0] == Errors.COORDINATOR_NOT_AVAILABLE
    assert s.state() == before and "txn-new" not in s.coord.txns
    monkeypatch.undo()
    assert s.coord.add_partitions(TID, pid, epoch, [T1], NOW) == Errors.NONE
    monkeypatch.setattr(s.coord.log, "append", broken)
    assert s.coord.end_txn(TID, pid, epoch, True, NOW) == Errors.COORDINATOR_NOT_AVAILABLE
    assert s.state().state is TxnState.ONGOING and s.markers.calls == []


# -- recovery ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_recovery_completes_prepared_transactions(s: Setup, commit: bool) -> None:
    pid, epoch = s.ready()
    s.coord.add_partitions(TID, pid, epoch, [T1, T2, T3], NOW)
    s.markers.failing = {T1, T2, T3}  # as if the broker died right after logging Prepare
    s.coord.end_txn(TID, pid, epoch, commit, NOW)
    assert s.state().state is (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
    s.restart(Markers())
    assert s.markers.calls == [(pid, epoch, commit, (T1, T2, T3))]
    assert s.state().state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
    assert s.coord.end_txn(TID, pid, epoch, commit, NOW) == Errors.NONE
    s.restart(Markers())  # completed: nothing to redo
    assert s.markers.calls == []


def test_recovery_keeps_ongoing_transactions_until_their_timeout(s: Setup) -> None:
    pid, epoch = s.ready(timeout=5000)
    s.coord.add_partitions(TID, pid, epoch, [T1], NOW)
    other_pid, other_epoch = s.ready("txn-b")
    s.coord.add_partitions("txn-b", other_pid, other_epoch, [T2], NOW)
    s.coord.end_txn("txn-b", other_pid, other_epoch, True, NOW)
    before = dict(s.coord.txns)
    s.restart(Markers())
    assert s.coord.txns == before and s.markers.calls == []
    assert s.coord.by_producer == {pid: TID, other_pid: "txn-b"}
    assert s.coord.add_partitions(TID, pid, epoch, [T3], NOW + 100) == Errors.NONE  # still usable
    s.coord.tick(NOW + 5001)
    assert s.markers.calls == [(pid, epoch + 1, False, (T1, T3))]


def test_producer_ids_after_restart_are_new(s: Setup) -> None:
    pid, _ = s.ready()
    s.restart()
    other, _ = s.ready("txn-b")
    assert other != pid
    assert s.ready() == (pid, 1)


def test_torn_log_tail_is_truncated(s: Setup) -> None:
    pid, epoch = s.ready()
    s.coord.add_partitions(TID, pid, epoch, [T1], NOW)
    log_path = s.coord.log.current_path
    good = log_path.read_bytes()
    s.coord.add_partitions(TID, pid, epoch, [T2], NOW)
    full = log_path.read_bytes()
    log_path.write_bytes(full[: len(good) + (len(full) - len(good)) // 2])  # half of the last entry
    s.restart()
    assert s.state().partitions == {T1}
    assert log_path.read_bytes() == good
    # Appends after the cut replay cleanly.
    assert s.coord.add_partitions(TID, pid, epoch, [T3], NOW) == Errors.NONE
    s.restart()
    assert s.state().partitions == {T1, T3}


def test_corrupt_entry_stops_replay_there(s: Setup) -> None:
    pid, epoch = s.ready()
    log_path = s.coord.log.current_path
    good = len(log_path.read_bytes())
    s.coord.add_partitions(TID, pid, epoch, [T1], NOW)
    s.coord.add_partitions(TID, pid, epoch, [T2], NOW)
    data = bytearray(log_path.read_bytes())
    data[good + 20] ^= 0xFF  # inside the payload of the second entry: its checksum fails
    log_path.write_bytes(bytes(data))
    s.restart()
    assert s.state().state is TxnState.EMPTY  # the later, intact entry is not applied either
    assert len(log_path.read_bytes()) == good


def test_garbage_length_is_not_allocated(s: Setup) -> None:
    s.ready()
    log_path = s.coord.log.current_path
    good = log_path.read_bytes()
    log_path.write_bytes(good + b"\xff\xff\xff\xff" + b"\x00" * 8 + b"{}")
    s.restart()
    assert s.state().state is TxnState.EMPTY and log_path.read_bytes() == good


def drive(s: Setup, rounds: int) -> None:
    """Many transitions over several ids: commits, aborts, fencing, an expiry-free mix."""
    for i in range(rounds):
        tid = f"txn-{i % 4}"
        error, pid, epoch = s.init(tid)
        if error == Errors.CONCURRENT_TRANSACTIONS:  # an open one was aborted by fencing: retry
            error, pid, epoch = s.init(tid)
        assert error == Errors.NONE
        s.coord.add_partitions(tid, pid, epoch, [T1, (f"x{i % 3}", i % 2)], NOW + i)
        if i % 5 != 4:
            s.coord.end_txn(tid, pid, epoch, i % 2 == 0, NOW + i)


def snapshots(s: Setup) -> list[Path]:
    return sorted((s.path / "txn").glob("txn-*.snapshot"))


def test_compaction_replays_to_the_same_state(s: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coordinator_module, "COMPACT_AFTER_ENTRIES", 7)
    drive(s, 23)
    assert snapshots(s)
    assert len(decode_entries(s.coord.log.current_path)) < 7
    before = dict(s.coord.txns)
    assert any(t.state is TxnState.ONGOING for t in before.values())
    s.restart(Markers())
    assert s.coord.txns == before and s.markers.calls == []


def test_compaction_at_the_real_threshold(s: Setup) -> None:
    pid, epoch = s.ready()
    s.coord.add_partitions(TID, pid, epoch, [T1], NOW)
    for i in range(coordinator_module.COMPACT_AFTER_ENTRIES):
        s.ready(f"other-{i % 50}")
    assert snapshots(s) and len(decode_entries(s.coord.log.current_path)) < 100
    before = dict(s.coord.txns)
    s.restart(Markers())
    assert s.coord.txns == before and s.state().partitions == {T1}


def test_crash_before_the_snapshot_is_written_replays_the_same(s: Setup) -> None:
    drive(s, 11)
    s.coord.log.work = BlockingWork()  # the snapshot job is queued, never run: the crash came first
    before = dict(s.coord.txns)
    s.coord.log.roll(s.coord._snapshot())
    s.ready("late")
    after = dict(s.coord.txns)
    assert not snapshots(s) and len(list((s.path / "txn").glob("txn-*.log"))) == 2
    s.restart(Markers())
    assert s.coord.txns == after and set(after) - set(before) == {"late"}


def test_crash_before_older_files_are_deleted_replays_the_same(s: Setup) -> None:
    drive(s, 11)
    old_log = s.coord.log.current_path
    kept = old_log.read_bytes()
    s.coord.log.roll(s.coord._snapshot())
    assert not old_log.exists()
    old_log.write_bytes(kept)  # the crash came between the snapshot's rename and the deletion
    before = dict(s.coord.txns)
    s.restart(Markers())
    assert s.coord.txns == before and not old_log.exists()


def test_corrupt_snapshot_keeps_what_follows_it(s: Setup) -> None:
    drive(s, 6)
    s.coord.log.roll(s.coord._snapshot())
    pid, epoch = s.ready("late")
    snapshots(s)[-1].write_bytes(b"\x00" * 8 + b"{}")
    s.restart(Markers())
    assert set(s.coord.txns) == {"late"}  # only what the log after it holds, not garbage
    assert s.state("late").producer_id == pid


def test_an_old_format_log_is_converted(s: Setup) -> None:
    """The coordinator's files of earlier versions (txn.log, txn.snapshot) are read once and
    rewritten as a snapshot of the durable log."""
    pid, epoch = s.ready()
    s.coord.add_partitions(TID, pid, epoch, [T1], NOW)
    state = s.state()
    directory = s.path / "txn"
    for path in directory.iterdir():
        path.unlink()
    snapshot_doc = json.dumps({"other": s.state().evolve(transactional_id="other", producer_id=99).to_json()}).encode()
    (directory / "txn.snapshot").write_bytes(xxhash.xxh64_intdigest(snapshot_doc).to_bytes(8, "big") + snapshot_doc)
    entry = json.dumps(state.to_json()).encode()
    (directory / "txn.log").write_bytes(
        struct.pack(">IQ", len(entry), xxhash.xxh64_intdigest(entry)) + entry + b"\x00\x00\x01")  # a torn tail
    s.restart(Markers())
    assert s.state() == state and s.state("other").producer_id == 99
    assert not (directory / "txn.log").exists() and not (directory / "txn.snapshot").exists()
    s.restart(Markers())
    assert s.state() == state and s.state("other").producer_id == 99


# -- LSO and the aborted-transaction index of a partition log ---------------------------------------


def txn_batch(pid: int, seq: int, count: int = 2, *, epoch: int = 0, transactional: bool = True) -> bytes:
    records = [
        Record(offset_delta=i, timestamp_delta=i, key=None, value=b"p%d-%d" % (pid, seq + i))
        for i in range(count)
    ]
    return build_batch(
        records,
        base_timestamp=NOW,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
    )


A, B, C = 500, 501, 502


def build_mixed(log: PartitionOfLog) -> None:
    """0-1 plain, 2-3 A, 4 plain, 5-6 B, 7-8 A, 9 A-commit, 10-11 B, 12 B-abort, 13-14 C (open)."""
    log.append(make_batch(2), NOW)
    log.append(txn_batch(A, 0), NOW)
    log.append(make_batch(1), NOW)
    log.append(txn_batch(B, 0), NOW)
    log.append(txn_batch(A, 2), NOW)
    assert log.append_marker(A, 0, True, 0, NOW) == 9
    log.append(txn_batch(B, 2), NOW)
    assert log.append_marker(B, 0, False, 0, NOW) == 12
    log.append(txn_batch(C, 0), NOW)


def check_mixed(log: PartitionOfLog) -> None:
    assert log.log_end_offset == 15
    assert log.last_stable_offset == 13
    assert log.producers.aborted == [AbortedTxn(B, 5, 12)]
    assert log.producers.aborted_between(0, 15) == [AbortedTxn(B, 5, 12)]
    assert log.producers.aborted_between(0, 5) == []  # ends before B's first offset
    assert log.producers.aborted_between(12, 15) == [AbortedTxn(B, 5, 12)]  # the marker itself
    assert log.producers.aborted_between(13, 15) == []
    assert {pid: e.txn_first_offset for pid, e in log.producers.producers.items()} == {
        A: None,
        B: None,
        C: 13,
    }


def test_lso_is_the_first_offset_of_the_earliest_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(make_batch(2), NOW)
    assert log.last_stable_offset == 2  # no transaction: the high watermark
    log.append(txn_batch(A, 0), NOW)
    assert log.last_stable_offset == 2
    log.append(make_batch(1), NOW)
    log.append(txn_batch(B, 0), NOW)
    assert log.last_stable_offset == 2
    log.append(txn_batch(A, 2), NOW)
    log.append_marker(A, 0, True, 0, NOW)
    assert log.last_stable_offset == 5  # A done: B is now the earliest open one
    log.append(txn_batch(B, 2), NOW)
    log.append_marker(B, 0, False, 0, NOW)
    assert log.last_stable_offset == log.log_end_offset == 13
    log.append(txn_batch(C, 0), NOW)
    check_mixed(log)


def test_read_committed_range_stops_at_the_lso(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    build_mixed(log)
    data = log.read(0, 1 << 20, upper_bound=log.last_stable_offset).data
    offsets = [h.base_offset for _, h in iter_headers(data)]
    assert offsets == [0, 2, 4, 5, 7, 9, 10, 12]
    assert log.read(13, 1 << 20, upper_bound=13).data == b""


def test_marker_without_open_transaction_changes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(make_batch(1), NOW)
    log.append_marker(A, 3, False, 0, NOW)  # e.g. a timeout abort of a txn that wrote nothing here
    assert log.producers.aborted == [] and log.last_stable_offset == 2
    # The marker raised the producer's epoch: its older epoch can no longer write here.
    with pytest.raises(KafkaError) as info:
        log.append(txn_batch(A, 0, epoch=2), NOW)
    assert info.value.error == Errors.INVALID_PRODUCER_EPOCH


def test_marker_with_an_older_epoch_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(txn_batch(A, 0, epoch=4), NOW)
    with pytest.raises(KafkaError) as info:
        log.append_marker(A, 3, False, 0, NOW)
    assert info.value.error == Errors.INVALID_PRODUCER_EPOCH
    assert log.last_stable_offset == 0 and log.log_end_offset == 2
    log.append_marker(A, 5, False, 0, NOW)  # a fencing abort with the bumped epoch is fine
    assert log.producers.aborted == [AbortedTxn(A, 0, 2)] and log.last_stable_offset == 3


def test_lso_and_aborted_survive_clean_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    build_mixed(log)
    log.close()
    log = open_log(tmp_path)
    check_mixed(log)
    log.append(txn_batch(C, 2), NOW)
    log.append_marker(C, 0, False, 0, NOW)
    assert log.producers.aborted == [AbortedTxn(B, 5, 12), AbortedTxn(C, 13, 17)]
    assert log.last_stable_offset == 18


def test_lso_and_aborted_survive_a_crash(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    build_mixed(log)
    crash(log)
    log = open_log(tmp_path)  # no snapshot: rebuilt by scanning the headers (markers decoded)
    check_mixed(log)
    log.append(txn_batch(C, 2), NOW)
    crash(log)
    log = open_log(tmp_path)
    assert log.last_stable_offset == 13
    log.append_marker(C, 0, True, 0, NOW)
    assert log.last_stable_offset == log.log_end_offset == 18
    assert log.producers.aborted == [AbortedTxn(B, 5, 12)]


def test_lso_and_aborted_survive_a_crash_across_rolled_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=200)
    build_mixed(log)
    assert len(log.segment_base_offsets) > 3 and log.producers.snapshot_offsets()
    crash(log)
    log = open_log(tmp_path, segment_bytes=200)  # latest roll snapshot + the tail after it
    check_mixed(log)


def test_torn_tail_after_crash_reopens_the_transaction_it_held(tmp_path: Path) -> None:
    """A marker lost in a torn write: the transaction is open again (the coordinator rewrites it)."""
    log = open_log(tmp_path)
    log.append(txn_batch(A, 0), NOW)
    log.append_marker(A, 0, True, 0, NOW)
    assert log.last_stable_offset == 3
    segment = max(tmp_path.glob("*.log"))
    crash(log)
    with segment.open("r+b") as f:
        f.truncate(segment.stat().st_size - 5)
    log = open_log(tmp_path)
    assert log.log_end_offset == 2 and log.last_stable_offset == 0
    log.append_marker(A, 0, True, 0, NOW)
    assert log.last_stable_offset == log.log_end_offset == 3


def decode_entries(path: Path) -> list[bytes]:
    return scan(path.read_bytes())[0]


@pytest.mark.parametrize("txn", [
    TxnMetadata("plain", 7, 3, 60_000),
    TxnMetadata("ünïcode \"quoted\" \\ id\n", 2**40, 32766, 1, TxnState.PREPARE_COMMIT, 5, 32765,
                frozenset({("b-topic", 3), ("a-topic", 10), ("a-topic", 2), ("tøpic", 0)}),
                frozenset({"g2", "g1", "grüppe"}), 1_700_000_000_000, 1_700_000_000_123, 2, 99),
    TxnMetadata("dead", 0, 0, 1, TxnState.DEAD, -1, -1, start_ms=-1, last_update_ms=-1),
])
def test_entry_encoding_is_json_dumps_byte_for_byte(txn: TxnMetadata) -> None:
    """The hand-written entry encoding writes exactly what json.dumps wrote before it, and replays."""
    encoded = coordinator_module._encode(txn)
    assert encoded == json.dumps(txn.to_json(), separators=(",", ":")).encode()
    assert TxnMetadata.from_json(json.loads(encoded)) == txn


def test_evolve_copies_and_refuses_unknown_fields() -> None:
    txn = TxnMetadata("t", 1, 0, 1000, partitions=frozenset({("a", 0)}))
    ongoing = txn.evolve(state=TxnState.ONGOING, producer_epoch=1)
    assert ongoing == TxnMetadata("t", 1, 1, 1000, TxnState.ONGOING, partitions=frozenset({("a", 0)}))
    assert txn.state is TxnState.EMPTY and txn.producer_epoch == 0
    with pytest.raises(TypeError):
        txn.evolve(no_such_field=1)
    with pytest.raises(AttributeError):
        ongoing.state = TxnState.EMPTY  # type: ignore[misc]


class DecisionLog(DurableLog):
    """The native log, noting the commit decisions the coordinator records (PostgreSQL keeps them)."""

    decisions: list[tuple[int, int | None]]

    def record_decision(self, producer_id: int, epoch: int | None) -> None:
        self.decisions.append((producer_id, epoch))


@pytest.mark.parametrize("v2", [False, True])
def test_a_commit_decision_is_recorded_with_prepare_and_dropped_with_complete(tmp_path: Path, v2: bool) -> None:
    """With the PrepareCommit entry: the producer and the epoch of the transaction's batches (the
    V2 bump gives the markers the next one); with CompleteCommit: gone. Aborts record nothing."""
    s = Setup(tmp_path)
    log_ = DecisionLog(tmp_path / "decisions", "txn")
    log_.decisions = []
    s.coord = TransactionCoordinator(log_, ProducerIdAllocator(tmp_path, block_size=10).allocate, s.markers)
    s.coord.recover(NOW)
    pid, epoch = s.ready()
    s.markers.failing = {T2}  # a leader that has not written its marker yet
    assert s.coord.add_partitions(TID, pid, epoch, [T1, T2], NOW) == Errors.NONE
    if v2:
        assert s.coord.end_txn_v2(TID, pid, epoch, True, NOW) == (Errors.NONE, pid, epoch + 1)
    else:
        assert s.coord.end_txn(TID, pid, epoch, True, NOW) == Errors.NONE
    assert s.state().state is TxnState.PREPARE_COMMIT
    assert log_.decisions == [(pid, epoch)]  # the batches' epoch, not the V2 markers' epoch + 1
    s.markers.failing = set()
    s.coord.tick(NOW + 1)
    assert s.state().state is TxnState.COMPLETE_COMMIT
    assert log_.decisions == [(pid, epoch), (pid, None)]
    next_epoch = epoch + 1 if v2 else epoch
    assert s.coord.add_partitions(TID, pid, next_epoch, [T1], NOW + 2) == Errors.NONE
    if v2:
        assert s.coord.end_txn_v2(TID, pid, next_epoch, False, NOW + 2)[0] is Errors.NONE
    else:
        assert s.coord.end_txn(TID, pid, next_epoch, False, NOW + 2) == Errors.NONE
    assert s.state().state is TxnState.COMPLETE_ABORT
    assert log_.decisions == [(pid, epoch), (pid, None)]


def test_a_marker_lost_while_another_is_unwritten_is_written_again(tmp_path: Path) -> None:
    """#36 (verify-eos cluster seed 11): T1's marker was appended here, T2's leader was still being
    asked, and the round carrying T1's marker was refused (another broker claimed T1's log). The
    transaction was then among the unwritten ones, not those awaiting the round, so the loss was
    ignored: once T2's leader answered, the abort completed with no marker on T1, and the
    producer's next COMMIT there published the aborted records."""
    s = Setup(tmp_path)
    s.coord.runtime.on(AwaitSync, s.coord.hold_until_synced)  # as the server does for fsync=always
    pid, epoch = s.ready()
    s.coord.add_partitions(TID, pid, epoch, [T1, T2], NOW)
    s.markers.failing = {T2}
    assert s.coord.end_txn(TID, pid, epoch, False, NOW) == Errors.NONE
    assert s.coord.unwritten[TID] == {T2}
    s.coord.complete_synced([], NOW, frozenset({(f"{T1[0]}-{T1[1]}", pid)}))  # T1's round refused
    s.markers.failing = set()
    s.coord.retry_unwritten(NOW)  # T2's leader answered
    assert set(s.markers.calls[-1][3]) == {T1, T2}
    assert TID in s.coord.awaiting_sync  # completes with the next round that makes both durable
    s.coord.complete_synced(s.coord.take_awaiting(), NOW)
    assert s.state().state is TxnState.COMPLETE_ABORT


def test_an_abort_with_nothing_registered_is_answered_none_a_commit_is_not(s: Setup) -> None:
    """A client whose first AddPartitionsToTxn failed aborts an empty transaction: not fatal."""
    pid, epoch = s.ready()
    assert s.state().state is TxnState.EMPTY
    assert s.coord.end_txn(TID, pid, epoch, True, NOW) == Errors.INVALID_TXN_STATE  # a commit of nothing
    assert s.coord.end_txn(TID, pid, epoch, False, NOW) == Errors.NONE
    assert s.state().state is TxnState.EMPTY and s.markers.calls == []
    assert s.coord.end_txn(TID, pid, epoch + 1, False, NOW) == Errors.PRODUCER_FENCED  # still fenced
    s.coord.add_partitions(TID, pid, epoch, [T1], NOW)
    assert s.coord.end_txn(TID, pid, epoch, False, NOW) == Errors.NONE
    assert s.coord.end_txn(TID, pid, epoch, True, NOW) == Errors.INVALID_TXN_STATE  # a commit after an abort
