"""The verify-eos checks on made-up histories: a clean one passes, and each anomaly is caught."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from rivven_kproto.verify.checker import CHECKS, check, passed
from rivven_kproto.verify.history import (
    ABORTED,
    COMMITTED,
    ZOMBIE,
    ClientError,
    Commit,
    Fault,
    History,
    Read,
    Transaction,
    idempotent_value,
    value_of,
)

T = "t"


def clean() -> History:
    """Two committed transactions and one aborted one, all read back as Kafka would return them."""
    h = History(seed=1, bootstrap="x", topics={T: 2})
    offsets = {0: 0, 1: 0}
    for number, outcome in enumerate([COMMITTED, ABORTED, COMMITTED]):
        txn = Transaction(f"0/1/{number}", 0, 1, outcome=outcome)
        for i in range(2):
            partition = i % 2
            value = value_of(0, 1, number, i)
            txn.values.append((T, partition, value))
            offset = offsets[partition]
            offsets[partition] += 1
            h.acks[value] = (T, partition, offset)
            h.final_uncommitted.append(Read("u", T, partition, offset, value))
            if outcome == COMMITTED:
                h.final_committed.append(Read("c", T, partition, offset, value))
                h.polls.append(Read("assign#0", T, partition, offset, value))
        for partition in (0, 1):
            offsets[partition] += 1  # the marker
        h.transactions[txn.key] = txn
    return h


def counts(h: History) -> dict[str, int]:
    return {name: f.count for name, f in check(h).items() if f.count}


def test_a_clean_history_passes() -> None:
    findings = check(clean())
    assert passed(findings) and set(findings) == {name for name, _ in CHECKS}


def test_lost_write_and_torn_transaction() -> None:
    h = clean()
    h.final_committed = [r for r in h.final_committed if r.value != value_of(0, 1, 2, 1)]
    assert counts(h) == {"lost_write": 1, "torn_transaction": 1}
    assert "0/1/2/1" in check(h)["lost_write"].examples[0]


def test_aborted_read_during_the_run_and_at_the_end() -> None:
    h = clean()
    h.polls.append(Read("subscribe#1", T, 0, 2, value_of(0, 1, 1, 0)))
    h.final_committed.append(Read("c", T, 0, 2, value_of(0, 1, 1, 0)))
    assert counts(h) == {"aborted_read": 2}


def test_duplicate_and_wrong_ack() -> None:
    h = clean()
    value = value_of(0, 1, 0, 0)
    h.final_uncommitted.append(Read("u", T, 0, 9, value))
    assert counts(h) == {"duplicate": 1}
    h = clean()
    h.acks[value] = (T, 0, 4)  # the issue #14 symptom: the ack points at another record
    assert counts(h) == {"wrong_ack": 1}
    h = clean()
    h.acks[value] = (T, 0, None)  # acknowledged without an offset (librdkafka's implicit ack)
    assert counts(h) == {}


def test_order_non_monotonic_and_phantom() -> None:
    h = clean()
    for read in h.final_uncommitted:
        if read.value == value_of(0, 1, 2, 0):
            read.offset = -5  # before the producer's earlier record in partition 0
    assert counts(h)["order"] == 1
    h = clean()
    h.polls.append(copy.copy(h.polls[0]))
    assert counts(h) == {"non_monotonic": 1}
    h = clean()
    h.final_uncommitted.append(Read("u", T, 1, 50, "9/9/9/0"))
    assert counts(h) == {"phantom": 1}


def test_zombie_and_unexpected_errors() -> None:
    h = clean()
    h.transactions["0/1/0/zombie"] = Transaction("0/1/0/zombie", 0, 1, [(T, 0, "0/1/0/zombie/0")], ZOMBIE, True)
    h.errors.append(ClientError(0, 2, "commit", "OUT_OF_ORDER_SEQUENCE_NUMBER", True, False))
    h.errors.append(ClientError(0, 1, "zombie commit", "PRODUCER_FENCED", True, True))
    assert counts(h) == {"zombie_write": 1, "unexpected_error": 1}


@pytest.mark.parametrize("mutate", ["none", "lose"])
def test_history_round_trips_through_its_file(tmp_path: Path, mutate: str) -> None:
    h = clean()
    if mutate == "lose":
        h.final_committed.pop()
    h.errors.append(ClientError(1, 1, "abort", "INVALID_TXN_STATE", True, True, "after a fault"))
    path = tmp_path / "history.json"
    h.save(path)
    again = History.load(path)
    assert again == h
    assert counts(again) == counts(h)


def test_transform_stage_outputs_exactly_once() -> None:
    h = clean()
    h.transform = {"source": T, "sink": "out", "partitions": 1}
    committed = [r.value for r in h.final_committed]
    h.transform_output = [Read("o", "out", 0, i, "T:" + v) for i, v in enumerate(committed)]
    assert counts(h) == {}
    h.transform_output.append(Read("o", "out", 0, 99, "T:" + committed[0]))  # repeated
    h.transform_output = [r for r in h.transform_output if r.value != "T:" + committed[1]]  # lost
    h.transform_output.append(Read("o", "out", 0, 100, "T:" + value_of(0, 1, 1, 0)))  # from an aborted input
    assert counts(h) == {"transform": 3}


def test_early_read_a_record_seen_before_its_commit_began() -> None:
    h = clean()
    h.transactions["0/1/2"].committing_at = 10.0
    first, second = [r for r in h.polls if r.value.startswith("0/1/2/")]
    first.at, second.at = 10.5, 11.0  # after the commit began: what read_committed allows
    assert counts(h) == {}
    first.at = 9.5  # fetched before EndTxn was even sent: past the last stable offset
    assert counts(h) == {"early_read": 1}
    assert "0.500 s before its commit began" in check(h)["early_read"].examples[0]


def test_a_history_without_times_skips_the_early_read_check(tmp_path: Path) -> None:
    h = clean()
    h.save(tmp_path / "h.json")
    loaded = History.load(tmp_path / "h.json")
    assert all(r.at == 0.0 for r in loaded.polls) and counts(loaded) == {}


# -- the cluster fault test's checks (issue 36) -------------------------------------------------------


def with_idempotent(h: History, records: int = 4) -> History:
    """The idempotent producer's records on their own topic, acknowledged and in the log in order."""
    h.topics["i"] = 1
    for n in range(records):
        value = idempotent_value(1, n + 1)
        h.idempotent.append(("i", 0, value))
        h.idempotent_acks[value] = ("i", 0, n)
        h.final_uncommitted.append(Read("u", "i", 0, n, value))
        h.final_committed.append(Read("c", "i", 0, n, value))
    return h


def test_acknowledged_idempotent_records_are_owed_once_in_order() -> None:
    assert counts(with_idempotent(clean())) == {}

    lost = with_idempotent(clean())
    lost.final_uncommitted = [r for r in lost.final_uncommitted if r.value != idempotent_value(1, 2)]
    lost.final_committed = [r for r in lost.final_committed if r.value != idempotent_value(1, 2)]
    assert counts(lost) == {"lost_idempotent": 1}

    twice = with_idempotent(clean())
    again = Read("u", "i", 0, 4, idempotent_value(1, 1))  # written a second time after a retry
    twice.final_uncommitted.append(again)
    twice.final_committed.append(again)
    assert counts(twice) == {"duplicate": 2}  # in both final reads

    swapped = with_idempotent(clean())
    for reads in (swapped.final_uncommitted, swapped.final_committed):
        for read in reads:
            if read.topic == "i" and read.offset in (1, 2):
                read.offset = 3 - read.offset
    swapped.idempotent_acks[idempotent_value(1, 2)] = ("i", 0, 2)
    swapped.idempotent_acks[idempotent_value(1, 3)] = ("i", 0, 1)
    assert counts(swapped) == {"order": 1}

    moved = with_idempotent(clean())
    moved.idempotent_acks[idempotent_value(1, 2)] = ("i", 0, 3)  # acknowledged at another record's offset
    assert counts(moved) == {"wrong_ack": 1}

    # librdkafka acknowledges a batch whose answer was lost once a later one of the same producer
    # is acknowledged ("implicit ack"): success, with no offset. Nothing was claimed about the place.
    implicit = with_idempotent(clean())
    implicit.idempotent_acks[idempotent_value(1, 2)] = ("i", 0, None)
    assert counts(implicit) == {}
    gone = with_idempotent(clean())
    gone.idempotent_acks[idempotent_value(1, 2)] = ("i", 0, None)
    for reads in (gone.final_uncommitted, gone.final_committed):
        reads[:] = [read for read in reads if read.value != idempotent_value(1, 2)]
    assert "lost_idempotent" in counts(gone)  # it must still be in the log


def test_a_read_below_the_groups_acknowledged_commit_is_a_position_jump() -> None:
    h = clean()
    for n, read in enumerate(h.polls):
        read.at = 10.0 + n
    h.commits.append(Commit("assign", T, 0, 2, 10.5))  # after the first read of partition 0
    # A later session resumes at its committed offset: fine.
    h.polls.append(Read("assign#1", T, 0, 4, h.polls[-1].value, 20.0))
    assert "position_jump" not in counts(h)
    # Reset to 0 (OFFSET_OUT_OF_RANGE from a stale leader) after the commit of offset 2: a jump.
    h.polls.append(Read("assign#2", T, 0, 0, h.polls[0].value, 21.0))
    assert counts(h)["position_jump"] == 1
    assert "2 below its group's committed 2" in check(h)["position_jump"].examples[0]
    # A commit acknowledged only after the read does not count against it.
    late = clean()
    for n, read in enumerate(late.polls):
        read.at = 10.0 + n
    late.commits.append(Commit("assign", T, 0, 4, 30.0))
    assert "position_jump" not in counts(late)


def test_liveness_reports_the_longest_wait_for_a_commit_against_its_bound() -> None:
    h = clean()
    h.started_at = 100.0
    for n, txn in enumerate(h.transactions.values()):
        txn.began_at, txn.ended_at = 100.0 + 10 * n, 100.0 + 10 * n + 2
    assert counts(h) == {}
    slow = h.transactions["0/1/2"]
    slow.ended_at = slow.began_at + 130
    assert counts(h) == {"liveness": 1}
    assert check(h, stall_bound_s=200.0)["liveness"].count == 0
    assert "0/1/2 took 130.0 s" in check(h)["liveness"].examples[0]
    h.transform_stall = (150.0, 5.0)
    assert check(h)["liveness"].count == 2


def test_the_cluster_fields_round_trip_through_the_file(tmp_path: Path) -> None:
    h = with_idempotent(clean())
    h.started_at = 5.0
    h.commits.append(Commit("subscribe", T, 1, 3, 7.5))
    h.fault_log.append(Fault(1.5, 3, "kill", "node 2", "controller; restarted after 1.0 s"))
    h.transform_stall = (1.5, 2.0)
    h.transactions["0/1/0"].began_at, h.transactions["0/1/0"].ended_at = 6.0, 7.0
    h.save(tmp_path / "h.json")
    assert History.load(tmp_path / "h.json") == h


def test_a_hung_transform_call_is_a_liveness_finding() -> None:
    h = clean()
    h.faults["transform_hung_calls"] = 1
    assert counts(h) == {"liveness": 1}
