"""Commit decisions a read_committed read waits for, read from the shared database (#19).

On PostgreSQL a transaction's markers reach the partitions other brokers lead one leader at a
time, but its coordinator commits the decision to the database first (with the PrepareCommit
entry, ``record_decision``). Before a read_committed Fetch or ListOffsets is answered, the open
transactions that hold back a partition it reads are looked up there (one query, on a worker
thread): a decided commit is shown at once, so a consumer that has seen a commit on one partition
sees it on every other, whichever broker leads them. The lookup is planned as a job like a cold
read (``broker/log/decisions.py``): collected here, run on a worker thread, applied back here. A
transaction that this broker coordinates and holds Ongoing needs no query (its decision would be
made here); the native log has no such transactions at all (``undecided_transactions`` is empty).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.log.decisions import plan_decision_lookup
from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.broker.storage import StorageError
from rivven_kproto.broker.txn.state import TxnState

log = logging.getLogger(__name__)


def _ongoing_here(broker: Broker, producer_id: int, epoch: int) -> bool:
    """Does a coordinator of this broker hold the producer's transaction Ongoing (undecided)?"""
    coordinator = broker.producer_coordinator(producer_id)
    if coordinator is None:
        return False
    txn = coordinator.txns.get(coordinator.by_producer[producer_id])
    return txn is not None and txn.state is TxnState.ONGOING and txn.producer_epoch == epoch


async def learn_decisions(
    broker: Broker, reads: Iterable[tuple[Partition, int]], limiter: trio.CapacityLimiter
) -> None:
    """Before answering reads (partition, offset) at read_committed: learn which of the open
    transactions holding them back are decided committed. Without the database, nothing is
    learnt (the reads wait for the markers, as before)."""
    plan = plan_decision_lookup(reads, broker.storage.committed_decisions,
                                lambda producer_id, epoch: _ongoing_here(broker, producer_id, epoch))
    if plan is None:
        return
    try:
        decided = await trio.to_thread.run_sync(plan.run, limiter=limiter)
    except StorageError as exc:
        log.debug("reading transactions' commit decisions failed: %s", exc)
        return
    plan.apply(decided)
