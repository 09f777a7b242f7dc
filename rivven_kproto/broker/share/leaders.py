"""Share partitions kept by their partition's leader (KIP-932), on the PostgreSQL engine.

Kafka keeps a share-partition (a share group's view of one topic-partition: start offset,
in-flight records) with the partition's leader, and its persisted state with the share
coordinator under ``group:topicId:partition``. Here, where several brokers share one database,
the group's coordinator keeps the group's membership (ShareGroupHeartbeat, its shard's ``share``
log) and the leader keeps the share-partitions of the partitions it leads: ShareFetch and
ShareAcknowledge go to the leader, as the clients send them. Each led partition has its own
:class:`ShareCoordinator` (the same state machine as on one broker, holding only that
partition's share-partitions) on its own durable log, the partition's share-state log in the
database (``storage/postgres/share_state_log.py``), fenced like the partition's writes.

A partition's share state is loaded the first time this broker serves it as leader (after it
opened the partition: at start, or when the partition moved here), and forgotten when the
partition leaves (another log object, or none). :class:`LeaderShares` offers the interface the
share handlers use of a coordinator: the shares, the sessions (a member's share session here
spans the partitions this broker leads), commit by partition and the statistics.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rivven_kproto.codec.errors import Errors, KafkaError

from .config import ShareConfig
from .coordinator import ShareCoordinator
from .partition import SharePartition
from .sessions import ShareSessions
from .stats import ShareStats

log = logging.getLogger(__name__)

Key = tuple[str, int]


class LeaderShares:
    def __init__(self, config: ShareConfig, partition: Callable[[str, int], Any],
                 open_log: Callable[[Any], Any]) -> None:
        self.config = config
        self.config_of: Callable[[str], ShareConfig] = lambda group_id: config  # a group's settings
        self.partition = partition  # (topic, index) -> the led partition's log, else NOT_LEADER_OR_FOLLOWER
        self.open_log = open_log  # a led partition's log -> its share-state log
        self.sessions = ShareSessions()
        self.stats: dict[str, ShareStats] = {}
        self._held: dict[Key, tuple[Any, ShareCoordinator]] = {}
        self._retired: list[Any] = []  # logs of partitions gone, until their last entries are written
        self._preloaded: dict[Key, tuple[Any, Any]] = {}  # a led partition's log read ahead, off the loop
        self._retired_appends = 0

    def _of(self, topic: str, index: int) -> ShareCoordinator:
        """The partition's share coordinator here (loaded the first time this broker leads it)."""
        partition = self.partition(topic, index)
        held = self._held.get((topic, index))
        if held is not None and held[0] is partition:
            return held[1]
        if held is not None:
            self._forget((topic, index))
        preloaded = self._preloaded.pop((topic, index), None)
        ahead = preloaded is not None and preloaded[0] is partition
        shares = ShareCoordinator(self.config, preloaded[1] if preloaded is not None and ahead else self.open_log(partition))
        shares.stats = self.stats
        shares.config_of = self.config_of
        shares.load(0)
        log.info("share state of %s-%d loaded%s: %d share groups", topic, index, " (read ahead)" if ahead else "",
                 len(shares.groups))
        self._held[(topic, index)] = (partition, shares)
        return shares

    # -- reading a partition's share state ahead, on a worker thread (server/share_loading.py) ---

    def to_load(self, keys: Iterable[Key]) -> list[tuple[Key, Any, Any]]:
        """The partitions led here whose share state is not loaded nor read ahead yet: (key, the
        partition's log, its share-state log to read ahead with ``preload()``)."""
        wanted = []
        for key in dict.fromkeys(keys):
            try:
                partition = self.partition(*key)
            except KafkaError:
                continue
            held = self._held.get(key)
            ahead = self._preloaded.get(key)
            if (held is None or held[0] is not partition) and (ahead is None or ahead[0] is not partition):
                wanted.append((key, partition, self.open_log(partition)))
        return wanted

    def read_ahead(self, key: Key, partition: Any, durable_log: Any) -> None:
        """``durable_log`` was read ahead: the partition's first use here replays it from memory."""
        held = self._held.get(key)
        if held is None or held[0] is not partition:
            self._preloaded[key] = (partition, durable_log)

    def _forget(self, key: Key) -> None:
        _, shares = self._held.pop(key)
        self._retired.append(shares.log)
        self._retired_appends += shares.log.appended

    def current(self, group_id: str, topic: str, index: int) -> SharePartition | None:
        return self._of(topic, index).current(group_id, topic, index)

    def commit(self, group_id: str, staged: Mapping[Key, SharePartition]) -> None:
        """Each partition's staged state on its own log (one entry per partition)."""
        for key, state in staged.items():
            self._of(*key).commit(group_id, {key: state})

    # -- the group coordinator's admin changes (Alter/DeleteShareGroupOffsets), on the leader ----

    def alter(self, group_id: str, starts: Mapping[Key, int]) -> dict[Key, Errors]:
        """Reset the group's share-partitions led here to new start offsets, in-flight records
        dropped, on each partition's share-state log (the group's coordinator checked the group is
        empty); NOT_LEADER_OR_FOLLOWER for a partition not led here."""
        errors: dict[Key, Errors] = {}
        for key, start in starts.items():
            try:
                errors[key] = self._of(*key).alter_offsets(group_id, {key: start})
            except KafkaError as exc:
                errors[key] = exc.error
        return errors

    def delete(self, group_id: str, topic: str, indexes: Iterable[int]) -> Errors:
        """Forget the group's share-partitions of ``topic`` led here (NONE when one was found,
        UNKNOWN_TOPIC_OR_PARTITION when the group had none of them). Each partition's log holds
        one share-partition per group, so the group goes from it (a tombstone), and the log is
        compacted at once: its earlier rows of the group are deleted with the snapshot's job."""
        found = Errors.UNKNOWN_TOPIC_OR_PARTITION
        for index in indexes:
            shares = self._of(topic, index)
            if shares.group(group_id) is None:
                continue
            error = shares.delete_group(group_id)
            if error is not Errors.NONE:
                return error
            shares._compact()
            found = Errors.NONE
        return found

    def release_session(self, group_id: str, member_id: str) -> None:
        for _, shares in self._held.values():
            shares.release_session(group_id, member_id)

    def stats_of(self, group_id: str) -> ShareStats:
        stats = self.stats.get(group_id)
        if stats is None:
            stats = self.stats[group_id] = ShareStats()
        return stats

    def tick(self, now_ms: int) -> bool:
        """Expire acquisition locks; forget the partitions no longer led here. True when records
        became available again."""
        changed = False
        for key, (partition, shares) in list(self._held.items()):
            try:
                led = self.partition(*key) is partition
            except KafkaError:  # NOT_LEADER_OR_FOLLOWER, a deleted topic: not led here now
                led = False
            if not led:
                self._forget(key)
                continue
            shares.tick(now_ms)
            changed = shares.take_changed() or changed
        self.drop_stale_reads()
        return changed

    def drop_stale_reads(self) -> None:
        """Reads ahead of partitions no longer led here (or led by another log object now)."""
        for key, (partition, _) in list(self._preloaded.items()):
            try:
                led = self.partition(*key) is partition
            except KafkaError:
                led = False
            if not led:
                del self._preloaded[key]

    def holds_locks(self) -> bool:
        return bool(self._held)

    def logs(self) -> list[Any]:
        """The share-state logs to write (those of partitions gone, until written)."""
        self._retired = [each for each in self._retired if each.pending]
        return [shares.log for _, shares in self._held.values()] + self._retired

    @property
    def appended(self) -> int:
        return self._retired_appends + sum(shares.log.appended for _, shares in self._held.values())

    def close(self) -> None:
        for durable_log in self.logs():
            durable_log.close()
