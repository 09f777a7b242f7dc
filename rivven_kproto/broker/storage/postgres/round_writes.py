"""A round's writes gathered into a few multi-row statements, sent in one pipeline.

Before, each log of a round wrote its own statements one round trip at a time (a partition: its
batches, then its end move; a coordinator log: its shard's lock check, its entries, each commit
decision): a transaction on the PostgreSQL engine cost ~17 statements and as many round trips.
Here every log only adds rows (``PgCommit.stage``); the round then sends one statement per kind
(the batches of every partition, the end moves, the coordinator entries, the decisions, the shard
lock check) after BEGIN in the same pipeline, reads the results once, and checks them before
COMMIT. The checks are the same as the statements' one by one: a partition whose end moved is
refused (``StorageConflict``), a coordinator log whose shard's lock is not this broker's changes
nothing (``PgLeases.judge_shard``): the transaction is rolled back and nothing is acknowledged.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from ..errors import StorageConflict

_INSERT_BATCHES = (
    "INSERT INTO kproto_batches (topic_id, partition, base_offset, last_offset, max_timestamp, producer_id,"
    " producer_epoch, base_sequence, attributes, data) SELECT * FROM unnest(%s::uuid[], %s::int[], %s::bigint[],"
    " %s::bigint[], %s::bigint[], %s::bigint[], %s::smallint[], %s::int[], %s::smallint[], %s::bytea[])"
    " ON CONFLICT DO NOTHING"
)
# Each partition's end moves only while this log is its writer, from where it left it (or, when its
# earlier attempt of the same commit reached the database but the answer was lost, from anywhere up
# to the new end); a partition without a row gets one. Rows returned: the moves made. The UPDATE
# does not see the rows the INSERT adds (one snapshot), so each key is returned at most once.
_MOVE_ENDS = (
    "WITH m (topic_id, partition, start, before, after, writer) AS (SELECT * FROM unnest(%s::uuid[], %s::int[],"
    " %s::bigint[], %s::bigint[], %s::bigint[], %s::uuid[])),"
    " created AS (INSERT INTO kproto_partitions (topic_id, partition, log_start_offset, next_offset, writer)"
    " SELECT topic_id, partition, start, after, writer FROM m ON CONFLICT (topic_id, partition) DO NOTHING"
    " RETURNING topic_id, partition),"
    " moved AS (UPDATE kproto_partitions p SET next_offset = m.after FROM m WHERE p.topic_id = m.topic_id"
    " AND p.partition = m.partition AND p.writer = m.writer AND p.next_offset BETWEEN m.before AND m.after"
    " RETURNING p.topic_id, p.partition)"
    " SELECT topic_id, partition FROM created UNION ALL SELECT topic_id, partition FROM moved"
)
_INSERT_ENTRIES = (
    "INSERT INTO kproto_coordinator_log (name, seq, payload) SELECT * FROM unnest(%s::text[], %s::bigint[],"
    " %s::bytea[]) ON CONFLICT DO NOTHING"
)
_UPSERT_DECISIONS = (
    "INSERT INTO kproto_txn_decisions (producer_id, producer_epoch) SELECT * FROM unnest(%s::bigint[],"
    " %s::smallint[]) ON CONFLICT (producer_id) DO UPDATE SET producer_epoch = EXCLUDED.producer_epoch"
)
_DELETE_DECISIONS = "DELETE FROM kproto_txn_decisions WHERE producer_id = ANY(%s::bigint[])"
_SHARD_HOLDERS = (
    "SELECT objid::bigint, pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
    " AND classid::bigint = %s AND objid::bigint = ANY(%s::bigint[])"
)

BatchRow = tuple[Any, ...]  # (topic_id, partition, base, last, max_timestamp, pid, epoch, sequence, attributes, data)


@dataclass
class _Move:
    item: object
    name: str
    key: tuple[uuid.UUID, int]
    start: int
    before: int
    after: int
    writer: uuid.UUID


@dataclass
class RoundWrites:
    """What the logs of one round add; ``send`` queues it, ``verify`` checks the answers."""

    shard_lock_class: int = 0
    batches: list[BatchRow] = field(default_factory=list)
    entries: list[tuple[str, int, bytes]] = field(default_factory=list)
    decisions: dict[int, int | None] = field(default_factory=dict)  # producer id -> epoch; None: delete
    moves: list[_Move] = field(default_factory=list)
    # shard -> how to judge its lock's holders (the leases' ``judge_shard``)
    shards: dict[int, Callable[[int, set[int]], None]] = field(default_factory=dict)
    _moved: psycopg.Cursor[Any] | None = None
    _holders: psycopg.Cursor[Any] | None = None

    def move_end(self, item: object, name: str, key: tuple[uuid.UUID, int], start: int, before: int, after: int,
                 writer: uuid.UUID) -> None:
        self.moves.append(_Move(item, name, key, start, before, after, writer))

    def decide(self, producer_id: int, epoch: int | None) -> None:
        """In order: made and completed in one round, a decision ends deleted."""
        self.decisions.pop(producer_id, None)
        self.decisions[producer_id] = epoch

    def send(self, conn: psycopg.Connection) -> None:
        """In pipeline mode, after BEGIN: the lock check first, then one statement per kind."""
        if self.shards:
            self._holders = conn.execute(_SHARD_HOLDERS, (self.shard_lock_class, list(self.shards)))
        if self.batches:
            conn.execute(_INSERT_BATCHES, [list(column) for column in zip(*self.batches, strict=True)])
        if self.moves:
            if len({move.key for move in self.moves}) != len(self.moves):
                raise ValueError("a round moves a partition's end twice")  # one begin_flush per log and round
            self._moved = conn.execute(_MOVE_ENDS, (
                [m.key[0] for m in self.moves], [m.key[1] for m in self.moves], [m.start for m in self.moves],
                [m.before for m in self.moves], [m.after for m in self.moves], [m.writer for m in self.moves]))
        if self.entries:
            conn.execute(_INSERT_ENTRIES, [list(column) for column in zip(*self.entries, strict=True)])
        upserts = [(pid, epoch) for pid, epoch in self.decisions.items() if epoch is not None]
        deletes = [pid for pid, epoch in self.decisions.items() if epoch is None]
        if upserts:
            conn.execute(_UPSERT_DECISIONS, ([pid for pid, _ in upserts], [epoch for _, epoch in upserts]))
        if deletes:
            conn.execute(_DELETE_DECISIONS, (deletes,))

    def verify(self) -> None:
        """After the pipeline's sync: the shards' locks are this broker's, every end moved."""
        if self._holders is not None:
            holders: dict[int, set[int]] = {shard: set() for shard in self.shards}
            for shard, pid in self._holders.fetchall():
                holders[int(shard)].add(int(pid))
            for shard, judge in self.shards.items():
                judge(shard, holders[shard])
        if self._moved is not None:
            moved = {(topic_id, int(index)) for topic_id, index in self._moved.fetchall()}
            for move in self.moves:
                if move.key not in moved:
                    conflict = StorageConflict(f"{move.name}: its end moved in the database (another writer?)")
                    conflict.item = move.item
                    raise conflict
