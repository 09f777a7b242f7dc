"""A round's writes as one statement: two round trips and one commit whatever the round holds.

Before, each log of a round wrote its own statements one round trip at a time (a partition: its
batches, then its end move; a coordinator log: its shard's lock check, its entries, each commit
decision), between BEGIN and COMMIT: a transaction on the PostgreSQL engine cost ~17 statements
and as many round trips. Here every log only adds rows (``PgCommit.stage``), and the round sends
them as arrays (binary: a text array of bytea costs Python time per byte) in one statement whose
parts (data-modifying CTEs) commit together, each write under the condition its old statement
checked:

- a partition's end moves only while this log is the partition's writer, from where it left it;
  its batches go in only if its end moved (a partition another broker claimed is left out, the
  rest of the round commits: ``refused`` names them);
- coordinator entries and commit decisions go in only if this broker's session holds the lock of
  every coordinator shard the round writes; the lock's holders come back, and
  ``PgLeases.judge_shard`` says what a missing lock means (the round is then retried or the broker
  stops; the partitions' part, committed, is written again idempotently).
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

log = logging.getLogger(__name__)

# The statement's parts; a round sends those it needs (a round of partitions alone does not read
# pg_locks, one of a coordinator log alone moves no ends), each combination prepared once.
_HOLDERS = (
    "holders AS (SELECT objid::bigint AS shard, pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND objsubid = 2 AND classid::bigint = %(lock_class)s AND objid::bigint = ANY(%(shards)b::bigint[])),"
    " shards_held AS (SELECT NOT EXISTS (SELECT 1 FROM unnest(%(shards)b::bigint[]) AS s (shard) WHERE NOT EXISTS"
    " (SELECT 1 FROM holders h WHERE h.shard = s.shard AND h.pid = %(owner)s)) AS held)"
)
_MOVES = (
    "m (topic_id, partition, start, before, after, writer) AS (SELECT * FROM unnest(%(m_topic)b::uuid[],"
    " %(m_partition)b::int[], %(m_start)b::bigint[], %(m_before)b::bigint[], %(m_after)b::bigint[],"
    " %(m_writer)b::uuid[])),"
    # A partition without a row gets one; the UPDATE does not see it (one snapshot): each key once.
    " created AS (INSERT INTO kproto_partitions (topic_id, partition, log_start_offset, next_offset, writer)"
    " SELECT topic_id, partition, start, after, writer FROM m ON CONFLICT (topic_id, partition) DO NOTHING"
    " RETURNING topic_id, partition),"
    # From where this log left it, or (its earlier attempt reached the database, the answer was
    # lost) from anywhere up to the new end.
    " moved AS (UPDATE kproto_partitions p SET next_offset = m.after FROM m WHERE p.topic_id = m.topic_id"
    " AND p.partition = m.partition AND p.writer = m.writer AND p.next_offset BETWEEN m.before AND m.after"
    " RETURNING p.topic_id, p.partition),"
    " ended AS (SELECT topic_id, partition FROM created UNION ALL SELECT topic_id, partition FROM moved),"
    " batches AS (INSERT INTO kproto_batches (topic_id, partition, base_offset, last_offset, max_timestamp,"
    " producer_id, producer_epoch, base_sequence, attributes, data) SELECT * FROM unnest(%(b_topic)b::uuid[],"
    " %(b_partition)b::int[], %(b_base)b::bigint[], %(b_last)b::bigint[], %(b_time)b::bigint[],"
    " %(b_pid)b::bigint[], %(b_epoch)b::smallint[], %(b_sequence)b::int[], %(b_attributes)b::smallint[],"
    " %(b_data)b::bytea[]) AS b (topic_id, partition) WHERE (b.topic_id, b.partition) IN"
    " (SELECT topic_id, partition FROM ended) ON CONFLICT DO NOTHING)"
)
_HELD = " WHERE (SELECT held FROM shards_held)"
_ENTRIES = (
    "entries AS (INSERT INTO kproto_coordinator_log (name, seq, payload) SELECT * FROM unnest(%(e_name)b::text[],"
    " %(e_seq)b::bigint[], %(e_payload)b::bytea[]){held} ON CONFLICT DO NOTHING)"
)
_DECIDED = (
    "decided AS (INSERT INTO kproto_txn_decisions (producer_id, producer_epoch) SELECT * FROM"
    " unnest(%(d_pid)b::bigint[], %(d_epoch)b::smallint[]){held}"
    " ON CONFLICT (producer_id) DO UPDATE SET producer_epoch = EXCLUDED.producer_epoch)"
)
_COMPLETED = "completed AS (DELETE FROM kproto_txn_decisions WHERE producer_id = ANY(%(c_pid)b::bigint[]){held})"
_ENDED = "SELECT topic_id, partition, NULL::bigint, NULL::int FROM ended"
_HOLDING = "SELECT NULL::uuid, NULL::int, shard, pid FROM holders"
_NOTHING = "SELECT NULL::uuid, NULL::int, NULL::bigint, NULL::int WHERE false"


@functools.cache
def _statement(shards: bool, moves: bool, entries: bool, decided: bool, completed: bool) -> str:
    """The round's statement of the parts it needs (its entries and decisions under the shards' locks)."""
    where, also = (_HELD, _HELD.replace(" WHERE ", " AND ")) if shards else ("", "")
    parts = [text for wanted, text in ((shards, _HOLDERS), (moves, _MOVES), (entries, _ENTRIES.format(held=where)),
                                       (decided, _DECIDED.format(held=where)), (completed, _COMPLETED.format(held=also)))
             if wanted]
    answers = [text for wanted, text in ((moves, _ENDED), (shards, _HOLDING)) if wanted] or [_NOTHING]
    return ("WITH " + ", ".join(parts) + " " if parts else "") + " UNION ALL ".join(answers)


BatchRow = tuple[Any, ...]  # (topic_id, partition, base, last, max_timestamp, pid, epoch, sequence, attributes, data)
_BATCH_COLUMNS = ("b_topic", "b_partition", "b_base", "b_last", "b_time", "b_pid", "b_epoch", "b_sequence",
                  "b_attributes", "b_data")


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
    """What the logs of one round add; ``execute`` writes it all in one statement."""

    shard_lock_class: int = 0
    owner_pid: int = 0  # the backend of this broker's own session, which holds its shards' locks
    batches: list[BatchRow] = field(default_factory=list)
    entries: list[tuple[str, int, bytes]] = field(default_factory=list)
    decisions: dict[int, int | None] = field(default_factory=dict)  # producer id -> epoch; None: delete
    moves: list[_Move] = field(default_factory=list)
    # shard -> what a lock not held by this broker means (the leases' ``judge_shard``)
    shards: dict[int, Callable[[int, set[int]], None]] = field(default_factory=dict)

    def move_end(self, item: object, name: str, key: tuple[uuid.UUID, int], start: int, before: int, after: int,
                 writer: uuid.UUID) -> None:
        self.moves.append(_Move(item, name, key, start, before, after, writer))

    def decide(self, producer_id: int, epoch: int | None) -> None:
        """In order: made and completed in one round, a decision ends deleted."""
        self.decisions.pop(producer_id, None)
        self.decisions[producer_id] = epoch

    def send(self, conn: psycopg.Connection) -> psycopg.Cursor[Any]:
        """The round's statement (in a pipeline, its answer comes with the pipeline's sync)."""
        if len({move.key for move in self.moves}) != len(self.moves):
            raise ValueError("a round moves a partition's end twice")  # one begin_flush per log and round
        upserts = [(pid, epoch) for pid, epoch in self.decisions.items() if epoch is not None]
        deletes = [pid for pid, epoch in self.decisions.items() if epoch is None]
        params: dict[str, Any] = {}
        if self.shards:
            params.update(lock_class=self.shard_lock_class, owner=self.owner_pid, shards=list(self.shards))
        if self.moves:
            params.update(m_topic=[m.key[0] for m in self.moves], m_partition=[m.key[1] for m in self.moves],
                          m_start=[m.start for m in self.moves], m_before=[m.before for m in self.moves],
                          m_after=[m.after for m in self.moves], m_writer=[m.writer for m in self.moves])
            columns = list(zip(*self.batches, strict=True)) if self.batches else [() for _ in _BATCH_COLUMNS]
            params.update({name: list(column) for name, column in zip(_BATCH_COLUMNS, columns, strict=True)})
        if self.entries:
            names, seqs, payloads = zip(*self.entries, strict=True)
            params.update(e_name=list(names), e_seq=list(seqs), e_payload=list(payloads))
        if upserts:
            params.update(d_pid=[pid for pid, _ in upserts], d_epoch=[epoch for _, epoch in upserts])
        if deletes:
            params.update(c_pid=deletes)
        statement = _statement(bool(self.shards), bool(self.moves), bool(self.entries), bool(upserts), bool(deletes))
        return conn.execute(statement, params)

    def verify(self, cursor: psycopg.Cursor[Any]) -> list[object]:
        """The items refused (their partition's end moved: another writer); raises what
        ``judge_shard`` raises when a shard's lock is not this broker's."""
        rows = cursor.fetchall()
        ended = {(topic_id, int(index)) for topic_id, index, _, _ in rows if topic_id is not None}
        holders: dict[int, set[int]] = {shard: set() for shard in self.shards}
        for topic_id, _, shard, pid in rows:
            if topic_id is None:
                holders[int(shard)].add(int(pid))
        for shard, judge in self.shards.items():
            judge(shard, holders[shard])
        refused = [move for move in self.moves if move.key not in ended]
        for move in refused:
            log.warning("%s: its end moved in the database (another writer?); the partition moved to another broker",
                        move.name)
        return [move.item for move in refused]
