"""Writing a transaction's markers: on the partitions and group shards this broker serves, or
asked of the broker that does (``RemoteMarkers``, sent by the server as WriteTxnMarkers).

The transaction coordinator calls ``write_markers`` (its marker writer) and ``complete_groups``
(its group completer); both only report what is not done yet, and the coordinator retries. Kept
apart from ``Broker`` so that the broker's catalog and the coordinators' marker rules are read
(and changed) one at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from rivven_kproto.codec.errors import KafkaError

from ..coordinator_shards import (
    GROUP_SHARD_TOPIC,
    REMOTE_MARKER_EPOCH,
    CoordinatorShard,
    GroupsPending,
    complete_producer,
)
from ..faults import fault_point
from ..log.partition import Partition
from .remote import RemoteMarker, RemoteMarkers

log = logging.getLogger(__name__)

COORDINATOR_EPOCH = 0  # the coordinator epoch markers carry: a shard's coordinator never moves while it serves


class LedTopic(Protocol):
    """A topic as the marker writer sees it: its partitions' logs, None where another broker leads."""

    partitions: list[Partition | None]


class MarkerWriter:
    """The broker's marker writer: its topics, coordinator shards and the remote markers it asks for."""

    def __init__(self, topics: Mapping[str, LedTopic], shards: Mapping[int, CoordinatorShard],
                 shard_of: Callable[[str], int], unflushed: set[Partition]) -> None:
        self.topics = topics
        self.shards = shards
        self.shard_of = shard_of
        self.unflushed = unflushed  # logs the broker wrote (markers) since the last flush
        self.remote = RemoteMarkers()

    def write_markers(
        self, producer_id: int, producer_epoch: int, commit: bool, partitions: Iterable[tuple[str, int]], now_ms: int
    ) -> set[tuple[str, int]]:
        """Write a COMMIT/ABORT marker to each partition; returns those that failed (to retry).

        A partition whose topic was deleted meanwhile needs no marker and counts as written.
        """
        failed: set[tuple[str, int]] = set()
        for written, (topic, index) in enumerate(partitions, start=1):
            if topic == GROUP_SHARD_TOPIC:  # a group shard the transaction committed offsets in (V2)
                if not self._mark_group_shard(producer_id, producer_epoch, commit, index):
                    failed.add((topic, index))
                continue
            owner = self.topics.get(topic)
            if owner is None or not 0 <= index < len(owner.partitions):
                continue
            log_ = owner.partitions[index]
            if log_ is None or log_.fenced:  # led by another broker: it writes the marker (WriteTxnMarkers)
                key = RemoteMarker(producer_id, producer_epoch, commit, topic, index)
                if not self.remote.written(key):
                    failed.add((topic, index))
                continue
            try:
                log_.append_marker(producer_id, producer_epoch, commit, COORDINATOR_EPOCH, now_ms)
                self.unflushed.add(log_)
            except (KafkaError, OSError):
                log.exception("writing a transaction marker to %s-%d failed", topic, index)
                failed.add((topic, index))
            fault_point(f"txn-after-marker-{written}")
        return failed

    def _mark_group_shard(self, producer_id: int, producer_epoch: int, commit: bool, shard: int) -> bool:
        """A transaction's marker on a group shard: its groups' pending offsets of the producer
        installed or dropped, here or by the shard's holder (WriteTxnMarkers); True once done."""
        local = self.shards.get(shard)
        if local is None:
            return self.remote.written(RemoteMarker(producer_id, producer_epoch, commit, GROUP_SHARD_TOPIC, shard))
        try:
            complete_producer(local.groups, producer_id, commit)
        except OSError:
            log.exception("completing producer %d's offsets in coordinator shard %d failed", producer_id, shard)
            return False
        return True

    def complete_groups(self, producer_id: int, group_ids: Iterable[str], commit: bool) -> None:
        """A transaction's completion in the groups it carried offsets of: by their shard's
        coordinator here, or a marker to the broker holding their shard (GroupsPending until it
        acknowledged; the transaction coordinator retries)."""
        by_shard: dict[int, list[str]] = {}
        for group_id in group_ids:
            by_shard.setdefault(self.shard_of(group_id), []).append(group_id)
        pending = []
        for shard, ids in sorted(by_shard.items()):
            local = self.shards.get(shard)
            if local is not None:
                local.groups.complete_transaction(producer_id, ids, commit)
                continue
            marker = RemoteMarker(producer_id, REMOTE_MARKER_EPOCH, commit, GROUP_SHARD_TOPIC, shard)
            if not self.remote.written(marker):
                pending.append(shard)
        if pending:
            raise GroupsPending(f"producer {producer_id}'s offsets in group shards {pending} are not completed yet")
