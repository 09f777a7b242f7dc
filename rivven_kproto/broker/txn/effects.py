"""The effects a transaction coordinator's operations return (run by the coordinator runtime
after their records are in the log; see ``broker/coordinator_runtime.py``). Plain values, made
several times per transaction: slotted dataclasses, not frozen ones (cheaper to build)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .state import TxnMetadata, TxnState

Partition = tuple[str, int]
# (producer id, epoch, commit, partitions, now_ms) -> partitions whose marker could not be written
MarkerWriter = Callable[[int, int, bool, Iterable[Partition], int], set[Partition]]
# (producer id, groups, commit): make pending transactional offsets visible or drop them
GroupCompleter = Callable[[int, frozenset[str], bool], None]


class GroupsNotCompleted(OSError):
    """``complete_groups`` could not complete every group yet (another broker holds some): retried."""


@dataclass(slots=True)
class AwaitSync:
    """Every marker of the transaction is written: complete it, at once (the coordinator's own
    runner), or once a flush that starts after now made the markers durable (the runner the
    server registers for ``fsync=always``: ``hold_until_synced``, then ``complete_synced``)."""

    txn: TxnMetadata


@dataclass(slots=True)
class WriteMarkers:
    """Write the COMMIT/ABORT marker of a prepared transaction to these partitions; the outcome
    (the partitions not written yet) goes back to ``markers_written``."""

    txn: TxnMetadata
    partitions: tuple[Partition, ...]
    after_prepare: bool = False  # the fault tests' crash point "txn-after-prepare" comes first

    @property
    def commit(self) -> bool:
        return self.txn.state is TxnState.PREPARE_COMMIT


@dataclass(slots=True)
class CompleteGroups:
    """Install or drop the transaction's pending offsets in its groups; the outcome (done or
    not yet) goes back to ``groups_completed``."""

    txn: TxnMetadata


@dataclass(slots=True)
class RecordDecision:
    """Record a commit's decision with the log (``producer_epoch`` None: every marker is written)."""

    producer_id: int
    producer_epoch: int | None


@dataclass(slots=True)
class Completed:
    """A completion was logged: count it and observe how long it took."""

    commit: bool
    seconds: float
