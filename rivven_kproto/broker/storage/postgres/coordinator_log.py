"""A coordinator's log (transactions, groups) in PostgreSQL, with ``DurableLog``'s interface.

Entries are rows ``(name, seq, payload)``; a snapshot is one row holding the framed payloads of the
whole state as of ``seq``. ``append`` keeps the entry in memory; the flusher's round inserts it in
its database transaction, and a request that wrote an entry is answered only after that commit
(the server treats this engine like ``fsync=always``). ``roll`` writes the snapshot and deletes the
entries below it in one transaction, as a job: replay reads the snapshot, then the entries from
its ``seq`` on, so a crash at any point replays to the same state. Entries are written only in a
transaction that finds this broker's session holding the lock of the log's coordinator shard: a
broker that lost it (to another broker, after losing the database) can change nothing.

A transaction coordinator also records its commit decisions here (``record_decision``): the row
naming the producer goes in the same database transaction as the PrepareCommit entry and leaves
with the CompleteCommit entry, so leaders waiting for a marker can tell a decided commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rivven_kproto.broker.durable.flush import FlushItem
from rivven_kproto.broker.durable.log import MAGIC, MAX_ENTRY, frame, scan
from rivven_kproto.broker.durable.work import BlockingWork, submit

from .commit import PgCommit, pg_items
from .engine import PgEngine
from .round_writes import RoundWrites


@dataclass(frozen=True)
class _Decision:
    producer_id: int
    epoch: int | None  # None: the transaction is complete, its decision no longer needed


class PgDurableLog:
    def __init__(self, storage: PgEngine, name: str, work: BlockingWork | None = None, shard: int = 0) -> None:
        self.storage = storage
        self.name = name
        self.shard = shard  # the coordinator shard whose lock every write of this log checks
        self.work = work
        self.size = 0  # bytes appended since the last snapshot (the coordinators compact on it)
        self.appended = 0
        self.snapshot_size = 0
        self._seq = 0  # the next entry's sequence number
        self._pending: list[tuple[str, int, bytes] | _Decision] = []
        self._preloaded: tuple[list[bytes], int, int, int] | None = None

    def preload(self) -> None:
        """Read the log ahead (a worker thread, while this broker holds the shard's lock, so
        nobody else appends): ``open`` then replays without touching the database on the loop."""
        self._preloaded = self._read()

    def open(self) -> list[bytes]:
        read, self._preloaded = self._preloaded or self._read(), None
        payloads, self.snapshot_size, self.size, self._seq = read
        return payloads

    def _read(self) -> tuple[list[bytes], int, int, int]:
        """The snapshot's payloads then the entries after it; snapshot bytes, entry bytes, next seq."""
        snapshot_size = size = 0
        with self.storage.pool.connection() as conn:
            snapshot = conn.execute(
                "SELECT seq, payloads FROM kproto_coordinator_snapshots WHERE name = %s", (self.name,)
            ).fetchone()
            payloads: list[bytes] = []
            base = 0
            if snapshot is not None:
                base = snapshot[0]
                data = bytes(snapshot[1])
                payloads, _ = scan(data)
                snapshot_size = len(data)
            rows = conn.execute(
                "SELECT seq, payload FROM kproto_coordinator_log WHERE name = %s AND seq >= %s ORDER BY seq",
                (self.name, base),
            ).fetchall()
        for seq, payload in rows:
            payloads.append(bytes(payload))
            size += len(payload)
            base = seq + 1
        return payloads, snapshot_size, size, base

    def append(self, payload: bytes) -> None:
        if len(payload) > MAX_ENTRY:
            raise ValueError(f"log entry of {len(payload)} bytes exceeds {MAX_ENTRY}")
        self._pending.append((self.name, self._seq, payload))
        self._seq += 1
        self.size += len(payload)
        self.appended += 1

    def record_decision(self, producer_id: int, epoch: int | None) -> None:
        """With the entry appended just before: the producer's transaction (its batches' epoch)
        is decided committed; ``None``: its markers are all written, the record goes."""
        self._pending.append(_Decision(producer_id, epoch))

    def begin_sync(self) -> PgCommit | None:
        if not self._pending:
            return None
        items, self._pending = self._pending, []
        judge, shard, name = self.storage.leases.judge_shard, self.shard, self.name

        def stage(round_: RoundWrites, _: PgCommit) -> None:
            round_.shards[shard] = judge  # checked in the round's transaction, before its COMMIT
            for item in items:  # in order: made and completed in one round, a decision ends deleted
                if isinstance(item, _Decision):
                    round_.decide(item.producer_id, item.epoch)
                else:
                    round_.entries.append(item)

        return PgCommit(kind=name, items=items, stage=stage)

    def abandon_sync(self, item: FlushItem) -> None:
        """A round that failed: its entries go again, first."""
        (pending,) = pg_items([item])
        self._pending = pending.items + self._pending

    def roll(self, snapshot: Iterable[bytes], *, now: bool = False) -> None:
        data = MAGIC + b"".join(frame(payload) for payload in snapshot)
        seq, name = self._seq, self.name
        self.size = 0
        self.snapshot_size = len(data)

        def write_snapshot() -> None:
            with self.storage.pool.connection() as conn, conn.transaction():
                conn.execute(
                    "INSERT INTO kproto_coordinator_snapshots (name, seq, payloads) VALUES (%s, %s, %s)"
                    " ON CONFLICT (name) DO UPDATE SET seq = EXCLUDED.seq, payloads = EXCLUDED.payloads"
                    " WHERE kproto_coordinator_snapshots.seq <= EXCLUDED.seq",
                    (name, seq, data),
                )
                conn.execute("DELETE FROM kproto_coordinator_log WHERE name = %s AND seq < %s", (name, seq))

        if now:
            self.close()  # entries before the snapshot are committed first
        submit(None if now else self.work, write_snapshot)

    def close(self) -> None:
        pending = self.begin_sync()
        if pending is not None:
            self.storage.commit([pending])
