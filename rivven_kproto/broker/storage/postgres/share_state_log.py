"""A share-partition's state log (KIP-932) in PostgreSQL: kept by the partition's leader.

On this engine a share-partition (a share group's view of one topic-partition) lives with the
partition's leader, as in Kafka. Its durable state is a coordinator log named
``share/<topic id>/<partition>`` (``PgDurableLog``'s rows and snapshot), holding the
``share-partition`` records of every share group reading that partition: a new leader replays it
when the partition moves to it (a killed or lapsed leader), and finds every acknowledgement the
old leader answered, its acquired records available again.

Its writes are fenced like the partition's own: each round's entries go in only while this
leader's partition log is still the partition's ``writer`` (``kproto_partitions``), so a leader
that lost the partition changes nothing (``StorageConflict``: the round commits without them).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg

from rivven_kproto.broker.durable.log import MAGIC, frame
from rivven_kproto.broker.durable.work import BlockingWork

from ..errors import StorageConflict
from .commit import PgCommit
from .coordinator_log import PgDurableLog, _Decision
from .engine import PgEngine

# A partition without a row yet (created here, nothing produced) is claimed for this leader, as
# its first commit would; then the row must name this leader's partition log as its writer.
_CLAIM_IF_NEW = (
    "INSERT INTO kproto_partitions (topic_id, partition, log_start_offset, next_offset, writer)"
    " VALUES (%s, %s, 0, 0, %s) ON CONFLICT (topic_id, partition) DO NOTHING"
)
_WRITER = "SELECT writer FROM kproto_partitions WHERE topic_id = %s AND partition = %s FOR SHARE"


_SNAPSHOT = (
    "INSERT INTO kproto_coordinator_snapshots (name, seq, payloads) VALUES (%s, %s, %s)"
    " ON CONFLICT (name) DO UPDATE SET seq = EXCLUDED.seq, payloads = EXCLUDED.payloads"
    " WHERE kproto_coordinator_snapshots.seq <= EXCLUDED.seq"
)


@dataclass(frozen=True)
class _Roll:
    """A snapshot of the whole state as of ``seq``: it replaces the entries below ``seq``."""

    seq: int
    data: bytes


def share_log_name(topic_id: uuid.UUID, index: int) -> str:
    return f"share/{topic_id}/{index}"


class PgShareStateLog(PgDurableLog):
    def __init__(self, storage: PgEngine, topic_id: uuid.UUID, index: int, writer: uuid.UUID,
                 work: BlockingWork | None = None, partition: Any = None) -> None:
        super().__init__(storage, share_log_name(topic_id, index), work)
        self.key = (topic_id, index)
        self.writer = writer  # the leader's partition log (``PgEngineLog.writer``)
        self.partition = partition  # that log: fenced here when a write of this log is refused

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def roll(self, snapshot: Iterable[bytes], *, now: bool = False) -> None:
        """Compaction in the next commit round, after the entries before it and fenced like them
        (not a job of its own): a deposed leader cannot replace the snapshot, and a share group's
        deletion (its tombstone then a snapshot without it) leaves none of its rows behind."""
        data = MAGIC + b"".join(frame(payload) for payload in snapshot)
        self._pending.append(_Roll(self._seq, data))  # type: ignore[arg-type]
        self.size = 0
        self.snapshot_size = len(data)
        if now:
            self.close()

    def begin_sync(self) -> PgCommit | None:
        if not self._pending:
            return None
        items: list[Any] = [item for item in self._pending if not isinstance(item, _Decision)]  # (no decisions here)
        rows = [item for item in items if not isinstance(item, _Roll)]
        rolls: list[_Roll] = [item for item in items if isinstance(item, _Roll)]
        self._pending = []
        key, writer, name, partition = self.key, self.writer, self.name, self.partition

        def write(conn: psycopg.Connection) -> None:
            conn.execute(_CLAIM_IF_NEW, (*key, writer))
            row = conn.execute(_WRITER, key).fetchone()
            if row is None or row[0] != writer:
                if partition is not None:  # nothing more is written or served here (as its own refused commit)
                    partition.fenced = True
                raise StorageConflict(f"{name}: the partition has another leader now")
            if rows:
                conn.cursor().executemany(
                    "INSERT INTO kproto_coordinator_log (name, seq, payload) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                    rows)
            if rolls:  # the last snapshot is the state as of the round's end
                conn.execute(_SNAPSHOT, (name, rolls[-1].seq, rolls[-1].data))
                conn.execute("DELETE FROM kproto_coordinator_log WHERE name = %s AND seq < %s", (name, rolls[-1].seq))

        return PgCommit(write, kind="share", items=items)
