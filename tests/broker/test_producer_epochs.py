"""Issue #14: producer epochs, markers and the duplicate check, through the real partition log.

The bug: a COMMIT/ABORT marker of a newer epoch raised the producer's epoch without emptying its
cache of batches, so the new epoch's first batch (sequence 0) was answered as a duplicate of an
older epoch's batch at the same sequences, and silently dropped. The rules tested here are
Kafka's (ProducerStateEntry.maybeUpdateProducerEpoch, ProducerAppendInfo.checkSequence), checked
against an independent model that keeps every batch ever written.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.records.batch import iter_headers
from rivven_kproto.codec.records.records import Record, build_batch, decode_batch

from .log_helpers import NOW, crash, open_log

PID = 7000


def batch(seq: int, count: int = 1, *, pid: int = PID, epoch: int = 0, txn: bool = False, tag: str = "") -> bytes:
    records = [
        Record(offset_delta=i, timestamp_delta=0, key=None, value=f"{tag or pid}:{epoch}:{seq + i}".encode())
        for i in range(count)
    ]
    return build_batch(
        records, base_timestamp=NOW, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn
    )


def values_at(log: Partition) -> dict[int, bytes]:
    """Offset -> value of every data record in the log (control batches skipped)."""
    data = log.read(log.log_start_offset, 1 << 30).data
    found: dict[int, bytes] = {}
    for position, header in iter_headers(data):
        if header.is_control:
            continue
        for record in decode_batch(data, position).records:
            assert record.value is not None
            found[header.base_offset + record.offset_delta] = record.value
    return found


def reopen(log: Partition, path: Path, how: str) -> Partition:
    if how == "clean":
        log.close()
    elif how == "crash":
        crash(log)
    else:
        return log
    return open_log(path)


# -- the scenario of the issue -------------------------------------------------------------------


@pytest.mark.parametrize("restart", ["none", "clean", "crash"])
@pytest.mark.parametrize("first_commit", [True, False])
@pytest.mark.parametrize("marker_commit", [True, False])
def test_marker_of_a_new_epoch_before_its_first_batch(
    tmp_path: Path, restart: str, first_commit: bool, marker_commit: bool
) -> None:
    """Instance 1 (epoch 0) writes sequence 0 and ends its transaction; instance 2 (epoch 1)
    registers the partition but its transaction ends before a batch left the client (only the
    marker reaches the log); its next transaction writes sequence 0 of epoch 1. That batch must be
    appended, not answered as a duplicate of instance 1's."""
    log = open_log(tmp_path)
    first = log.append(batch(0, epoch=0, txn=True, tag="one"), NOW)
    log.append_marker(PID, 0, first_commit, 0, NOW)
    log = reopen(log, tmp_path, restart)
    log.append_marker(PID, 1, marker_commit, 0, NOW)
    log = reopen(log, tmp_path, restart)
    second = log.append(batch(0, epoch=1, txn=True, tag="two"), NOW)
    assert not second.duplicate
    assert second.base_offset > first.base_offset
    log.append_marker(PID, 1, True, 0, NOW)
    log = reopen(log, tmp_path, restart)
    assert values_at(log)[second.base_offset] == b"two:1:0"
    # A retry of the new batch is now the duplicate, with its own offset.
    retry = log.append(batch(0, epoch=1, txn=True, tag="two"), NOW)
    assert retry.duplicate and retry.base_offset == second.base_offset


@pytest.mark.parametrize("restart", ["none", "clean", "crash"])
def test_new_epoch_after_marker_continues_at_one_not_out_of_order(tmp_path: Path, restart: str) -> None:
    """The stale cache also turned the new epoch's second batch into OUT_OF_ORDER_SEQUENCE_NUMBER
    (fatal for librdkafka) when the old epoch had written further than the new one."""
    log = open_log(tmp_path)
    for seq in range(0, 6, 2):
        log.append(batch(seq, 2, epoch=3), NOW)
    log.append_marker(PID, 4, False, 0, NOW)
    log = reopen(log, tmp_path, restart)
    a = log.append(batch(0, 1, epoch=4), NOW)
    b = log.append(batch(1, 1, epoch=4), NOW)
    assert not a.duplicate and not b.duplicate and b.base_offset == a.base_offset + 1
    with pytest.raises(KafkaError) as info:
        log.append(batch(5, 1, epoch=4), NOW)  # a gap in the new epoch is still out of order
    assert info.value.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_marker_does_not_let_the_new_epoch_start_past_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(0, epoch=0), NOW)
    log.append_marker(PID, 1, False, 0, NOW)
    with pytest.raises(KafkaError) as info:
        log.append(batch(3, epoch=1), NOW)
    assert info.value.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as info:
        log.append(batch(0, epoch=0), NOW)  # the old epoch is fenced
    assert info.value.error == Errors.INVALID_PRODUCER_EPOCH


def test_plain_write_inside_an_open_transaction_is_invalid_txn_state(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(0, txn=True), NOW)
    with pytest.raises(KafkaError) as info:
        log.append(batch(1), NOW)
    assert info.value.error == Errors.INVALID_TXN_STATE
    log.append_marker(PID, 0, True, 0, NOW)
    assert not log.append(batch(1), NOW).duplicate


@pytest.mark.parametrize("restart", ["none", "clean", "crash"])
def test_a_sequence_reused_after_an_abort_is_new_data_not_a_duplicate(tmp_path: Path, restart: str) -> None:
    """What the verify-eos soak caught (seed 778369905): librdkafka wrote sequence 4 in a
    transaction, lost the answer to a cut, aborted, and gave sequence 4 to the next transaction's
    first message in the same epoch. Kafka answers that as a duplicate of the aborted batch: a
    committed record acknowledged at an aborted record's offset, and lost."""
    log = open_log(tmp_path)
    log.append(batch(0, 4, txn=True, tag="old"), NOW)
    log.append_marker(PID, 0, True, 0, NOW)
    aborted = log.append(batch(4, 1, txn=True, tag="aborted"), NOW)
    log.append_marker(PID, 0, False, 0, NOW)
    log = reopen(log, tmp_path, restart)
    reused = log.append(batch(4, 1, txn=True, tag="new"), NOW)
    assert not reused.duplicate and reused.base_offset > aborted.base_offset
    log = reopen(log, tmp_path, restart)
    retry = log.append(batch(4, 1, txn=True, tag="new"), NOW)  # the new batch's own retry
    assert retry.duplicate and retry.base_offset == reused.base_offset
    after = log.append(batch(5, 1, txn=True, tag="new"), NOW)
    log.append_marker(PID, 0, True, 0, NOW)
    assert values_at(log)[reused.base_offset] == b"new:0:4" and values_at(log)[after.base_offset] == b"new:0:5"


def test_after_an_abort_the_next_batch_may_also_continue_but_not_skip(tmp_path: Path) -> None:
    """A client that kept its sequences (every batch acknowledged) continues after the aborted
    ones; a sequence before the aborted transaction's or past its end is still out of order; a
    committed transaction's batches stay duplicates."""
    log = open_log(tmp_path)
    committed = log.append(batch(0, 2, txn=True), NOW)
    log.append_marker(PID, 0, True, 0, NOW)
    log.append(batch(2, 2, txn=True), NOW)
    log.append(batch(4, 1, txn=True), NOW)
    log.append_marker(PID, 0, False, 0, NOW)
    for seq in (1, 6):
        with pytest.raises(KafkaError) as info:
            log.append(batch(seq, 1, txn=True), NOW)
        assert info.value.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    again = log.append(batch(0, 2, txn=True), NOW)
    assert again.duplicate and again.base_offset == committed.base_offset
    assert not log.append(batch(5, 1, txn=True), NOW).duplicate  # continues past the aborted ones
    for seq, count in ((2, 2), (4, 1)):  # reuse is allowed only for the batch right after the abort
        with pytest.raises(KafkaError) as info:
            log.append(batch(seq, count, txn=True), NOW)
        assert info.value.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def _rewrite_as_version_1(snapshot: Path) -> None:
    payload = snapshot.read_bytes()[:-8]
    doc = json.loads(payload)
    doc["version"] = 1
    new = json.dumps(doc, separators=(",", ":")).encode()
    snapshot.write_bytes(new + struct.pack(">Q", xxhash.xxh64_intdigest(new)))


def test_old_snapshot_with_the_stale_cache_is_not_trusted(tmp_path: Path) -> None:
    """A version-1 snapshot written by the old code can hold an epoch-1 entry with epoch 0's
    batches; loading it must not bring that state back: the state is rebuilt from the log."""
    log = open_log(tmp_path)
    log.append(batch(0, epoch=0), NOW)
    log.append_marker(PID, 1, False, 0, NOW)
    log.close()
    (snapshot,) = tmp_path.glob("*.snapshot")
    doc = json.loads(snapshot.read_bytes()[:-8])
    ((pid, epoch, last_ts, batches, txn_first),) = doc["producers"]
    assert (pid, epoch, batches) == (PID, 1, [])
    # What the old code wrote: epoch 1 with epoch 0's batch still cached.
    doc["producers"] = [[pid, 1, last_ts, [[0, 0, 0, 0, NOW]], txn_first]]
    payload = json.dumps(doc, separators=(",", ":")).encode()
    snapshot.write_bytes(payload + struct.pack(">Q", xxhash.xxh64_intdigest(payload)))
    _rewrite_as_version_1(snapshot)
    log = open_log(tmp_path)
    entry = log.producers.producers[PID]
    assert entry.epoch == 1 and list(entry.batches) == []
    info = log.append(batch(0, epoch=1), NOW)
    assert not info.duplicate and info.base_offset == 2


# -- a model of Kafka's rules ----------------------------------------------------------------------


@dataclass
class ModelProducer:
    epoch: int
    era: int = 0  # how many times the epoch changed: batches of another era are never duplicates
    txn_first: int | None = None  # first offset of its open transaction


@dataclass
class Written:
    pid: int
    era: int
    first_seq: int
    last_seq: int
    first_offset: int
    aborted: bool = False  # in a transaction its producer aborted in the same epoch


@dataclass
class Model:
    """Every batch ever appended, kept whole; Kafka's answers derived from the full history,
    plus our one rule beyond Kafka's: a batch of an aborted transaction is never a duplicate, and
    the next batch may reuse its sequences (the librdkafka abort that reuses them)."""

    producers: dict[int, ModelProducer] = field(default_factory=dict)
    written: list[Written] = field(default_factory=list)
    log_end: int = 0

    def _recent(self, pid: int, era: int) -> list[Written]:
        return [w for w in self.written if w.pid == pid and w.era == era][-5:]

    def append(self, pid: int, epoch: int, first_seq: int, count: int, txn: bool) -> tuple[str, int]:
        last_seq = first_seq + count - 1
        p = self.producers.get(pid)
        if p is not None:
            recent = self._recent(pid, p.era)
            if epoch == p.epoch:
                for w in recent:
                    if (w.first_seq, w.last_seq) == (first_seq, last_seq) and not w.aborted:
                        return "duplicate", w.first_offset
            if epoch < p.epoch:
                return "error", Errors.INVALID_PRODUCER_EPOCH
            if epoch > p.epoch:
                if first_seq != 0:
                    return "error", Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
            else:
                last = recent[-1].last_seq if recent else -1
                aborted_tail = []
                for w in reversed(recent):
                    if not w.aborted:
                        break
                    aborted_tail.append(w)
                reused = bool(aborted_tail) and aborted_tail[-1].first_seq <= first_seq <= last
                if first_seq != last + 1 and not reused:
                    return "error", Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
            if p.txn_first is not None and not txn:
                return "error", Errors.INVALID_TXN_STATE
        if p is None:
            p = self.producers[pid] = ModelProducer(epoch)
        if epoch != p.epoch:
            p.epoch, p.era = epoch, p.era + 1
        offset = self.log_end
        self.written.append(Written(pid, p.era, first_seq, last_seq, offset))
        self.log_end += count
        if txn and p.txn_first is None:
            p.txn_first = offset
        return "appended", offset

    def marker(self, pid: int, epoch: int, commit: bool) -> tuple[str, int]:
        p = self.producers.get(pid)
        if p is not None and epoch < p.epoch:
            return "error", Errors.INVALID_PRODUCER_EPOCH
        if p is None:
            p = self.producers[pid] = ModelProducer(epoch)
        elif epoch > p.epoch:
            p.epoch, p.era = epoch, p.era + 1
        elif not commit and p.txn_first is not None:
            for w in self.written:
                if w.pid == pid and w.era == p.era and w.first_offset >= p.txn_first:
                    w.aborted = True
        p.txn_first = None
        offset = self.log_end
        self.log_end += 1
        return "marker", offset


operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("batch"), st.sampled_from([PID, PID + 1]), st.integers(0, 3), st.integers(0, 6),
            st.integers(1, 2), st.booleans(),
        ),
        st.tuples(st.just("marker"), st.sampled_from([PID, PID + 1]), st.integers(0, 3), st.booleans()),
        st.tuples(st.just("restart"), st.sampled_from(["clean", "crash"])),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations)
def test_producer_state_matches_kafkas_rules(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple]) -> None:
    """Invariant: a batch is a duplicate only if a batch with the same producer id, epoch and
    sequence range was appended (since the epoch last changed), and then its original offset is
    returned; every error is Kafka's; restarts change nothing; every appended record is readable."""
    path = tmp_path_factory.mktemp("epochs")
    log = open_log(path)
    model = Model()
    expected_values: dict[int, bytes] = {}
    for step, op in enumerate(ops):
        if op[0] == "restart":
            log = reopen(log, path, op[1])
            continue
        if op[0] == "marker":
            _, pid, epoch, commit = op
            want = model.marker(pid, epoch, commit)
            try:
                got: tuple[str, int] = ("marker", log.append_marker(pid, epoch, commit, 0, NOW))
            except KafkaError as exc:
                got = ("error", exc.error)
        else:
            _, pid, epoch, first_seq, count, txn = op
            want = model.append(pid, epoch, first_seq, count, txn)
            data = batch(first_seq, count, pid=pid, epoch=epoch, txn=txn, tag=f"s{step}")
            try:
                info = log.append(data, NOW)
                got = ("duplicate" if info.duplicate else "appended", info.base_offset)
            except KafkaError as exc:
                got = ("error", exc.error)
            if want[0] == "appended":
                for i in range(count):
                    expected_values[want[1] + i] = f"s{step}:{epoch}:{first_seq + i}".encode()
        assert got == want, f"step {step} {op}: broker {got}, Kafka's rules {want}"
    assert log.log_end_offset == model.log_end
    assert values_at(log) == expected_values
    log.close()
