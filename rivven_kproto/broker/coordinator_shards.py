"""Coordinator shards: the groups and transactional ids a broker coordinates, in shards.

Kafka spreads its coordinators over the partitions of ``__consumer_offsets`` and
``__transaction_state`` (a key's partition is a hash of it; the partition's leader coordinates).
We do the same with shards: a group or transactional id belongs to shard ``shard_of(key, count)``
(``broker.cluster``), and each shard has its own group coordinator, transaction coordinator and
logs. The native log has one shard (its logs are ``meta/groups`` and ``meta/txn`` as always); a
PostgreSQL database has the number recorded when it was created (its shard logs are named
``groups/<shard>`` and ``txn/<shard>``; a database of the single-coordinator version keeps one
shard and the old names). A broker serves the shards whose lock it holds (see ``storage``).

A transaction may carry the offsets of a group of another shard. Its completion is then, as in
Kafka, a marker on that shard ("partition" ``<shard>`` of ``__consumer_offsets``): written by the
group shard's coordinator itself when this broker holds it, otherwise sent to its holder as a
WriteTxnMarkers request (``RemoteMarkers``) and retried until acknowledged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .groups import GroupCoordinator
from .share import ShareCoordinator
from .txn.coordinator import GroupsNotCompleted, TransactionCoordinator

GROUP_SHARD_TOPIC = "__consumer_offsets"  # WriteTxnMarkers on (this, shard): complete the shard's txn offsets
REMOTE_MARKER_EPOCH = 0  # the producer epoch a group shard's remote marker carries (the groups ignore it)


class GroupsPending(GroupsNotCompleted):
    """A transaction's offsets in a group shard another broker holds are not completed yet (the
    coordinator keeps the transaction in Prepare* and retries, as for an unwritten marker)."""


@dataclass
class CoordinatorShard:
    index: int
    groups: GroupCoordinator
    txn: TransactionCoordinator
    share: ShareCoordinator | None = None  # share groups (KIP-932)

    @property
    def appended(self) -> int:
        groups = self.groups.log.appended if self.groups.log is not None else 0
        share = self.share.log.appended if self.share is not None and self.share.log is not None else 0
        return self.txn.log.appended + groups + share

    def logs(self) -> list[Any]:
        """The shard's coordinator logs (the flusher fsyncs them)."""
        share = [self.share.log] if self.share is not None and self.share.log is not None else []
        return [self.txn.log, self.groups.log, *share]

    def preload(self) -> None:
        """Worker thread: read the shard's logs ahead (``Broker.read_shard``)."""
        for durable_log in self.logs():
            durable_log.preload()

    def close(self) -> None:
        """Commit what the shard's logs still hold (off the loop; the shard is no longer served)."""
        self.groups.close()
        self.txn.log.close()
        if self.share is not None:
            self.share.close()


def log_names(shard: int, shard_count: int) -> tuple[str, str]:
    """The shard's group and transaction log names (one shard: the names logs always had)."""
    if shard_count == 1:
        return "groups", "txn"
    return f"groups/{shard}", f"txn/{shard}"


def complete_producer(groups: GroupCoordinator, producer_id: int, commit: bool) -> None:
    """A group shard's marker (WriteTxnMarkers on ``__consumer_offsets``): install or drop the
    producer's pending offsets in every group of the shard (logged, idempotent)."""
    group_ids = [group_id for group_id in groups.offsets.pending_group_ids()
                 if producer_id in groups.offsets.pending_producers(group_id)]
    groups.complete_transaction(producer_id, group_ids, commit)
