"""A share group's share-partitions as a partition's share-state log holds them (Kafka's
ReadShareGroupStateSummary: start offset and in-flight state), replayed read-only.

A partition's share-state log (on PostgreSQL, kept by the partition's leader) holds the records of
every share group reading that partition; replaying it with the same code the leader loads it with
(:meth:`ShareCoordinator.load`) gives exactly the state a new leader would serve.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from .config import ShareConfig
from .coordinator import ShareCoordinator
from .partition import SharePartition

K = TypeVar("K")
PartitionKey = tuple[str, int]


class _Payloads:
    """The read side of a durable log, over payloads already read."""

    def __init__(self, payloads: Iterable[bytes]) -> None:
        self._payloads = list(payloads)

    def open(self) -> list[bytes]:
        return self._payloads


def group_states(config: ShareConfig, logs: Mapping[K, Iterable[bytes]],
                 group_id: str) -> dict[PartitionKey, SharePartition]:
    """The group's share-partitions found in the logs (each log one partition's)."""
    found: dict[PartitionKey, SharePartition] = {}
    for payloads in logs.values():
        shares = ShareCoordinator(config, _Payloads(payloads))
        shares.load(0)
        group = shares.group(group_id)
        if group is not None:
            found.update(group.partitions)
    return found
