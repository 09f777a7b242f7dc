"""Transactions V2 (KIP-890 part 2) in the transaction coordinator: the epoch bump of every end,
retries recognised by the epoch one behind, the stale-epoch fence of the implicit add, empty
aborts, epoch exhaustion onto a new producer id, fencing and timeouts, and durable replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rivven_kproto.broker.txn.coordinator import INT16_MAX, MAX_EPOCH
from rivven_kproto.broker.txn.state import TxnMetadata, TxnState
from rivven_kproto.codec.errors import Errors

from .log_helpers import NOW
from .test_txn_coordinator import T1, T2, TID, Markers, Setup


@pytest.fixture
def s(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def begin(s: Setup, pid: int, epoch: int, *partitions: tuple[str, int]) -> None:
    """What a V2 Produce does first on each partition: the implicit add."""
    for partition in partitions or (T1,):
        assert s.coord.add_partitions(TID, pid, epoch, [partition], NOW, client_txn_version=2) is Errors.NONE


@pytest.mark.parametrize("commit", [True, False])
def test_every_end_bumps_the_epoch_and_the_markers_carry_it(s: Setup, commit: bool) -> None:
    pid, epoch = s.ready()
    begin(s, pid, epoch, T1, T2)
    assert s.state().client_txn_version == 2
    assert s.coord.end_txn_v2(TID, pid, epoch, commit, NOW) == (Errors.NONE, pid, epoch + 1)
    assert s.markers.calls == [(pid, epoch + 1, commit, (T1, T2))]
    txn = s.state()
    assert txn.state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
    assert (txn.producer_epoch, txn.last_producer_epoch) == (epoch + 1, epoch)
    # The next transaction runs at the returned epoch and ends one higher again.
    begin(s, pid, epoch + 1)
    assert s.coord.end_txn_v2(TID, pid, epoch + 1, True, NOW) == (Errors.NONE, pid, epoch + 2)


def test_v1_end_keeps_the_epoch(s: Setup) -> None:
    pid, epoch = s.ready()
    assert s.coord.add_partitions(TID, pid, epoch, [T1], NOW) is Errors.NONE
    assert s.coord.end_txn(TID, pid, epoch, True, NOW) is Errors.NONE
    assert s.markers.calls == [(pid, epoch, True, (T1,))]
    assert s.state().producer_epoch == epoch and s.state().client_txn_version == 0


def test_the_delayed_produce_of_the_previous_transaction_is_fenced(s: Setup) -> None:
    """KIP-890's case at the coordinator: with V2 the old epoch can no longer join transaction N+1;
    with V1 semantics (same epoch across transactions) it could."""
    pid, epoch = s.ready()
    begin(s, pid, epoch)
    _, _, new_epoch = s.coord.end_txn_v2(TID, pid, epoch, True, NOW)
    begin(s, pid, new_epoch, T2)  # transaction N+1 began
    assert s.coord.add_partitions(TID, pid, epoch, [T1], NOW, client_txn_version=2) is Errors.PRODUCER_FENCED
    assert s.coord.verify_partition(TID, pid, epoch, *T2) is Errors.INVALID_PRODUCER_EPOCH
    assert s.state().partitions == frozenset({T2})
    # V1: the ended transaction's epoch is still current, so its late write joins the next one.
    assert s.coord.end_txn_v2(TID, pid, new_epoch, False, NOW)[0] is Errors.NONE
    v1_epoch = new_epoch + 1
    assert s.coord.add_partitions(TID, pid, v1_epoch, [T1], NOW) is Errors.NONE
    assert s.coord.end_txn(TID, pid, v1_epoch, True, NOW) is Errors.NONE
    assert s.coord.add_partitions(TID, pid, v1_epoch, [T2], NOW) is Errors.NONE  # transaction N+1
    assert s.coord.verify_partition(TID, pid, v1_epoch, *T2) is Errors.NONE  # the late batch is admitted


def test_retries_are_recognised_by_the_epoch_one_behind(s: Setup) -> None:
    pid, epoch = s.ready()
    begin(s, pid, epoch)
    assert s.coord.end_txn_v2(TID, pid, epoch, True, NOW) == (Errors.NONE, pid, epoch + 1)
    calls = list(s.markers.calls)
    assert s.coord.end_txn_v2(TID, pid, epoch, True, NOW) == (Errors.NONE, pid, epoch + 1)  # lost answer
    assert s.markers.calls == calls
    assert s.coord.end_txn_v2(TID, pid, epoch, False, NOW)[0] is Errors.INVALID_TXN_STATE  # abort of a commit
    assert s.coord.end_txn_v2(TID, pid, epoch - 1, True, NOW)[0] is Errors.PRODUCER_FENCED
    assert s.coord.end_txn_v2(TID, pid, epoch + 2, True, NOW)[0] is Errors.PRODUCER_FENCED
    assert s.coord.end_txn_v2(TID, pid + 1, epoch + 1, True, NOW)[0] is Errors.INVALID_PRODUCER_ID_MAPPING
    assert s.coord.end_txn_v2("nobody", pid, epoch, True, NOW)[0] is Errors.INVALID_PRODUCER_ID_MAPPING
    # The same epoch as the coordinator's after a commit means the *next* end: nothing to commit.
    assert s.coord.end_txn_v2(TID, pid, epoch + 1, True, NOW)[0] is Errors.INVALID_TXN_STATE


def test_an_epoch_left_behind_by_a_v1_end_is_not_a_retry(s: Setup) -> None:
    pid, epoch = s.ready()
    _, _, epoch2 = s.init(pid=pid, epoch=epoch)  # KIP-360 bump: epoch + 1, last epoch = epoch
    assert s.coord.add_partitions(TID, pid, epoch2, [T1], NOW) is Errors.NONE
    assert s.coord.end_txn(TID, pid, epoch2, True, NOW) is Errors.NONE
    assert s.coord.end_txn_v2(TID, pid, epoch, True, NOW)[0] is Errors.PRODUCER_FENCED


def test_a_prepared_transaction_answers_concurrent_to_its_retry(s: Setup) -> None:
    pid, epoch = s.ready()
    begin(s, pid, epoch)
    s.markers.failing = {T1}
    assert s.coord.end_txn_v2(TID, pid, epoch, True, NOW) == (Errors.NONE, pid, epoch + 1)
    assert s.state().state is TxnState.PREPARE_COMMIT
    assert s.coord.end_txn_v2(TID, pid, epoch, True, NOW)[0] is Errors.CONCURRENT_TRANSACTIONS
    assert s.coord.end_txn_v2(TID, pid, epoch, False, NOW)[0] is Errors.INVALID_TXN_STATE
    assert s.coord.end_txn_v2(TID, pid, epoch + 1, True, NOW)[0] is Errors.PRODUCER_FENCED
    assert s.coord.add_partitions(TID, pid, epoch + 1, [T2], NOW, client_txn_version=2) is Errors.CONCURRENT_TRANSACTIONS


def test_empty_abort_is_allowed_and_bumps_empty_commit_is_not(s: Setup) -> None:
    pid, epoch = s.ready()
    assert s.coord.end_txn_v2(TID, pid, epoch, True, NOW)[0] is Errors.INVALID_TXN_STATE
    assert s.coord.end_txn_v2(TID, pid, epoch, False, NOW) == (Errors.NONE, pid, epoch + 1)
    assert s.markers.calls == [(pid, epoch + 1, False, ())]
    assert s.state().state is TxnState.COMPLETE_ABORT
    assert s.coord.end_txn_v2(TID, pid, epoch, False, NOW) == (Errors.NONE, pid, epoch + 1)  # retry
    assert s.coord.end_txn_v2(TID, pid, epoch + 1, False, NOW) == (Errors.NONE, pid, epoch + 2)  # next one


def _at_epoch(s: Setup, epoch: int) -> None:
    s.coord.log.append(json.dumps(s.state().evolve(producer_epoch=epoch).to_json()).encode())
    s.restart()


def test_exhausted_epoch_completes_onto_a_new_producer_id(s: Setup) -> None:
    pid, _ = s.ready()
    _at_epoch(s, MAX_EPOCH)
    begin(s, pid, MAX_EPOCH)
    error, new_pid, new_epoch = s.coord.end_txn_v2(TID, pid, MAX_EPOCH, True, NOW)
    assert error is Errors.NONE and new_pid != pid and new_epoch == 0
    assert s.markers.calls == [(pid, INT16_MAX, True, (T1,))]  # the last epoch, under the old id
    txn = s.state()
    assert (txn.producer_id, txn.producer_epoch, txn.last_producer_id, txn.next_producer_id) == (new_pid, 0, pid, -1)
    assert s.coord.by_producer == {new_pid: TID}
    assert s.coord.end_txn_v2(TID, pid, MAX_EPOCH, True, NOW) == (Errors.NONE, new_pid, 0)  # retry across
    assert s.coord.add_partitions(TID, pid, MAX_EPOCH, [T1], NOW, client_txn_version=2) is Errors.INVALID_PRODUCER_ID_MAPPING
    begin(s, new_pid, 0)
    assert s.coord.end_txn_v2(TID, new_pid, 0, False, NOW) == (Errors.NONE, new_pid, 1)


def test_crash_after_prepare_at_an_exhausted_epoch_recovers_onto_the_new_id(s: Setup) -> None:
    pid, _ = s.ready()
    _at_epoch(s, MAX_EPOCH)
    begin(s, pid, MAX_EPOCH)
    s.markers.failing = {T1}
    _, new_pid, _ = s.coord.end_txn_v2(TID, pid, MAX_EPOCH, False, NOW)
    assert s.state().next_producer_id == new_pid
    s.restart(Markers())
    assert s.markers.calls == [(pid, INT16_MAX, False, (T1,))]
    assert (s.state().state, s.state().producer_id, s.state().producer_epoch) == (TxnState.COMPLETE_ABORT, new_pid, 0)


@pytest.mark.parametrize("how", ["timeout", "new-instance"])
def test_fenced_v2_transaction_ends_two_epochs_up(s: Setup, how: str) -> None:
    pid, epoch = s.ready(timeout=5000)
    begin(s, pid, epoch)
    if how == "timeout":
        s.coord.tick(NOW + 5001)
    else:
        assert s.init()[0] is Errors.CONCURRENT_TRANSACTIONS
    assert s.markers.calls == [(pid, epoch + 2, False, (T1,))]
    txn = s.state()
    assert (txn.state, txn.producer_epoch, txn.last_producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 2, epoch + 1)
    assert s.coord.end_txn_v2(TID, pid, epoch, False, NOW)[0] is Errors.PRODUCER_FENCED
    assert s.coord.add_partitions(TID, pid, epoch, [T1], NOW, client_txn_version=2) is Errors.PRODUCER_FENCED


def test_v2_state_replays_and_old_entries_still_load(s: Setup) -> None:
    pid, epoch = s.ready()
    begin(s, pid, epoch)
    s.coord.end_txn_v2(TID, pid, epoch, True, NOW)
    begin(s, pid, epoch + 1)
    before = dict(s.coord.txns)
    s.restart(Markers())
    assert s.coord.txns == before and s.state().client_txn_version == 2
    # An entry written before transactions V2 existed (no client_txn_version / next_producer_id).
    old = {k: v for k, v in s.state().to_json().items() if k not in ("client_txn_version", "next_producer_id")}
    loaded = TxnMetadata.from_json(old)
    assert (loaded.client_txn_version, loaded.next_producer_id) == (0, -1)
    s.coord.log.append(json.dumps(old).encode())
    s.restart(Markers())
    assert s.state().client_txn_version == 0 and s.state().partitions == frozenset({T1})
