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
    History,
    Read,
    Transaction,
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
