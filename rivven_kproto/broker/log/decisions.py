"""The commit-decision lookup of a read_committed read, planned as a job like a cold read (#19, #38).

On a shared database a transaction's coordinator commits its decision before the markers reach
every partition. A read_committed Fetch or ListOffsets first learns which open transactions holding
its partitions back are decided committed: :func:`plan_decision_lookup` collects them on the loop,
:meth:`DecisionLookup.run` asks the store once on a worker thread, :meth:`DecisionLookup.apply`
tells the partitions back on the loop (as ``span.ColdRead`` is planned, run, then used by fetch).
The native log never plans one (``undecided_transactions`` is empty there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rivven_kproto.broker.log.partition import Partition

Waiting = tuple["Partition", int, int]  # the partition, the epoch of the batches, first offset
Lookup = Callable[[list[int]], dict[int, int]]  # producer ids -> epoch of a committed decision


@dataclass
class DecisionLookup:
    """The producers whose decisions a read waits for, and the one query that answers them."""

    waiting: dict[int, list[Waiting]]
    lookup: Lookup  # ``Storage.committed_decisions``: blocking, so run on a worker thread

    def run(self) -> dict[int, int]:
        """Worker thread: the committed decisions of the waiting producers (epoch by producer id)."""
        return self.lookup(list(self.waiting))

    def apply(self, decided: dict[int, int]) -> None:
        """Back on the loop: a decision of the epoch a partition waits for releases it."""
        for producer_id, epoch in decided.items():
            for partition, wanted_epoch, first in self.waiting.get(producer_id, ()):
                if epoch == wanted_epoch:
                    partition.learn_committed(producer_id, epoch, first)


def plan_decision_lookup(
    reads: Iterable[tuple[Partition, int]], lookup: Lookup, decided_here: Callable[[int, int], bool]
) -> DecisionLookup | None:
    """The lookup for reads (partition, offset) at read_committed, or None when no read waits for a
    decision made elsewhere (``decided_here(producer id, epoch)``: this broker's coordinator holds
    the transaction Ongoing, so its decision would be made here)."""
    waiting: dict[int, list[Waiting]] = {}
    for partition, offset in reads:
        for producer_id, epoch, first in partition.undecided_transactions(offset):
            if not decided_here(producer_id, epoch):
                waiting.setdefault(producer_id, []).append((partition, epoch, first))
    return DecisionLookup(waiting, lookup) if waiting else None
