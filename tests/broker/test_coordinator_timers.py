"""Timers as operations (pure code): a coordinator's timer makes Results, the runtime runs them.

The transaction coordinator's ``due``/``retries`` build the operations a tick or a remote
marker's answer starts, without running them; ``CoordinatorRuntime.run_each`` runs them one by
one, a failed one not stopping the rest.
"""

from __future__ import annotations

import logging

import pytest

from rivven_kproto.broker.coordinator_runtime import CoordinatorRuntime, Result
from rivven_kproto.broker.txn.effects import WriteMarkers
from rivven_kproto.broker.txn.state import TxnState
from rivven_kproto.codec.errors import Errors

from .test_coordinator_runtime import NOW, Counter, Markers, MemoryLog, coordinator


def test_run_each_runs_lazy_operations_in_order_and_survives_a_failed_one(caplog: pytest.LogCaptureFixture) -> None:
    shard, durable_log = Counter(), MemoryLog()
    runtime: CoordinatorRuntime[tuple[str, int]] = CoordinatorRuntime(durable_log, shard)
    seen: list[dict[str, int]] = []

    def operations() -> object:
        for key in ["a", "b", "c"]:
            seen.append(dict(shard.values))  # made after the one before it ran
            durable_log.failing = key == "b"
            yield Result(None, [(key, 1)])

    with caplog.at_level(logging.ERROR):
        assert runtime.run_each(operations(), NOW) == 2  # type: ignore[arg-type]
    assert seen == [{}, {"a": 1}, {"a": 1}]
    assert shard.values == {"a": 1, "c": 1} and durable_log.entries == [b"a=1", b"c=1"]
    assert "timer" in caplog.text


def test_a_tick_is_operations_that_nothing_runs_until_the_runtime_does() -> None:
    durable_log, markers = MemoryLog(), Markers()
    coord = coordinator(durable_log, markers, [0])
    _, pid, epoch = coord.init_producer_id("late", 1_000, -1, -1, NOW)
    assert coord.add_partitions("late", pid, epoch, [("t", 0)], NOW) is Errors.NONE
    _, pid2, epoch2 = coord.init_producer_id("stuck", 30_000, -1, -1, NOW)
    assert coord.add_partitions("stuck", pid2, epoch2, [("t", 1)], NOW) is Errors.NONE
    markers.failing = {("t", 1)}
    assert coord.end_txn("stuck", pid2, epoch2, True, NOW) is Errors.NONE  # its marker is still to write
    entries = len(durable_log.entries)

    due = list(coord.due(NOW + 1_001))
    assert len(durable_log.entries) == entries  # made, not run
    abort, resume = due
    (fenced,) = abort.records
    assert (fenced.transactional_id, fenced.state, fenced.producer_epoch) == ("late", TxnState.PREPARE_ABORT,
                                                                           epoch + 1)
    assert [type(effect) for effect in abort.effects] == [WriteMarkers]
    assert resume.records == () and [(e.txn.transactional_id, e.partitions) for e in resume.effects] == [
        ("stuck", (("t", 1),))]
    assert [r.effects[0].txn.transactional_id for r in coord.retries()] == ["stuck"]

    markers.failing = set()
    coord.runtime.run_each(due, NOW + 1_001)
    assert coord.txns["late"].state is TxnState.COMPLETE_ABORT
    assert coord.txns["stuck"].state is TxnState.COMPLETE_COMMIT
    assert list(coord.retries()) == [] and list(coord.due(NOW + 1_002)) == []


def test_an_idle_id_expires_by_a_due_operation() -> None:
    durable_log = MemoryLog()
    coord = coordinator(durable_log, Markers(), [0])
    coord.init_producer_id("idle", 1_000, -1, -1, NOW)
    assert list(coord.due(NOW + 200_000)) == []
    (expire,) = coord.due(NOW + 200_001)
    assert [txn.state for txn in expire.records] == [TxnState.DEAD] and "idle" in coord.txns
    coord.runtime.run_each([expire], NOW + 200_001)
    assert "idle" not in coord.txns
