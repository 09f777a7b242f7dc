"""The PostgreSQL engine (``--storage postgresql://...``): the ``Storage`` of brokers sharing a database.

Its parts: the connection pool (pool.py), the partition-data queries (queries.py), a round's
commit (commit.py), this broker's session and its advisory locks (leases.py, node_ids.py) and the
registry of brokers (registry.py); partitions and coordinator logs are partition.py and
coordinator_log.py. The event loop touches the database only while the broker opens (before it
serves) and for ListOffsets by timestamp of batches older than a partition's cache. A round's
writes are one database transaction (``commit``); a lost connection raises ``StorageUnavailable``:
the flusher keeps the round's writes and retries, and nothing is acknowledged meanwhile.
"""

from __future__ import annotations

import base64
import logging
import uuid
from pathlib import Path
from typing import Any

import psycopg

from rivven_kproto.broker.durable.flush import FlushItem
from rivven_kproto.broker.durable.work import BlockingWork, Document, submit
from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.partition import Partition

from ..errors import StorageConflict, StorageUnavailable
from .commit import PgCommit, commit_round, pg_items
from .coordinator_log import PgDurableLog
from .leases import SHARD_LOCK_CLASS, PgLeases
from .partition import open_partition
from .pool import POOL_SIZE, PgPool, unavailable_on_error
from .queries import PgQueries
from .registry import (
    COORDINATOR,
    SERVING,
    Registration,
)
from .replication import warn_about_durability
from .schema import migrate
from .share_state_log import PgShareStateLog

log = logging.getLogger(__name__)

COORDINATOR_SHARDS = 16  # shards of a database created by this version (recorded in kproto_counters)
LEGACY_LOG_NAMES = ("groups", "txn")  # a database of the single-coordinator version: one shard, these logs


class PgDocument(Document):
    def __init__(self, pool: PgPool, name: str) -> None:
        super().__init__(Path(f"postgresql:kproto_documents/{name}"))
        self.pool = pool
        self.name = name

    def read(self) -> bytes | None:
        row = self.pool.query_one("SELECT data FROM kproto_documents WHERE name = %s", (self.name,))
        return bytes(row[0]) if row is not None else None

    def save(self, work: BlockingWork | None, data: bytes) -> None:
        pool, name = self.pool, self.name

        def write() -> None:
            with pool.connection() as conn, conn.transaction():
                conn.execute(
                    "INSERT INTO kproto_documents (name, data) VALUES (%s, %s)"
                    " ON CONFLICT (name) DO UPDATE SET data = EXCLUDED.data", (name, data))

        submit(work, write, critical=True)


class PgBlocks:
    """Producer id blocks from one counter row: brokers sharing the database never share a block."""

    def __init__(self, pool: PgPool) -> None:
        self.pool = pool

    def reserve(self, size: int) -> tuple[int, int]:
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "INSERT INTO kproto_counters (name, value) VALUES ('producer_id', %s)"
                " ON CONFLICT (name) DO UPDATE SET value = kproto_counters.value + %s RETURNING value",
                (size, size),
            ).fetchone()
        assert row is not None
        end = int(row[0])
        return end - size, end


class PostgresStorage:
    kind = "postgresql"
    acknowledge_after_commit = True
    descriptors_per_partition = 0  # rows, not files
    closes_in_parallel = False  # partitions share the store's connection

    def __init__(
        self, url: str, *, pool_size: int = POOL_SIZE, standby: bool = False, node: tuple[int, str, int] | None = None,
        assign_node_id: bool = False,
    ) -> None:
        self.url = url
        # This broker's row in kproto_brokers (``node``: node id and advertised host and port).
        self.registration = Registration(node[0], node[1], node[2], uuid.uuid4()) if node is not None else None
        self.pool = PgPool(url, pool_size)
        self.queries = PgQueries(self.pool)
        self.coordinator_shards = 1
        with unavailable_on_error():
            self.leases = PgLeases(url, self.pool, node[0] if node is not None else 0, self.registration,
                                   standby=standby, assign_node_id=assign_node_id)
            self.node_id = self.leases.node_id
            # No --node-id: the lowest id whose node lock was free (see node_ids).
            self.assigned_node_id = self.leases.assigned_node_id
            if self.registration is not None:
                self.registration.node_id = self.node_id
            try:
                self.pool.open()
                with self.pool.connection() as conn:
                    migrate(conn)
                    warn_about_durability(conn)
                    self.coordinator_shards = self.leases.coordinator_shards = self._shard_count(conn)
                    if self.registration is not None:
                        self.registration.role = COORDINATOR if self.leases.coordinating else SERVING
                        self.registration.register(conn)
            except BaseException:
                self.pool.close()
                self.leases.close()
                raise

    @staticmethod
    def _shard_count(conn: psycopg.Connection) -> int:
        """The database's number of coordinator shards, recorded when the first broker of this
        version opened it: COORDINATOR_SHARDS for a new database, 1 for one whose coordinator logs
        were written by the single-coordinator version (its logs keep their names, "groups" and "txn")."""
        with conn.transaction():
            legacy = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM kproto_coordinator_log WHERE name = ANY(%s))"
                " OR EXISTS (SELECT 1 FROM kproto_coordinator_snapshots WHERE name = ANY(%s))",
                (list(LEGACY_LOG_NAMES), list(LEGACY_LOG_NAMES))).fetchone()
            count = 1 if legacy is not None and legacy[0] else COORDINATOR_SHARDS
            conn.execute("INSERT INTO kproto_counters (name, value) VALUES ('coordinator_shards', %s)"
                         " ON CONFLICT (name) DO NOTHING", (count,))
            row = conn.execute("SELECT value FROM kproto_counters WHERE name = 'coordinator_shards'").fetchone()
        assert row is not None
        return int(row[0])

    # -- the engine's interface -------------------------------------------------------------------

    def document(self, name: str) -> PgDocument:
        return PgDocument(self.pool, name)

    def coordinator_log(self, name: str, work: BlockingWork, shard: int = 0) -> PgDurableLog:
        return PgDurableLog(self, name, work, shard)

    def share_state_log(self, partition: Any, work: BlockingWork) -> PgShareStateLog:
        """The share-partition state log of a partition this broker leads (``share_state_log.py``)."""
        engine = partition.engine  # a ``PgEngineLog``: its row and the claim it holds on it
        topic_id, index = engine.key
        return PgShareStateLog(self, topic_id, index, engine.writer, work, partition)

    def producer_id_blocks(self) -> PgBlocks:
        return PgBlocks(self.pool)

    def cluster_id(self, node_id: int) -> str:
        fresh = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=").encode()
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO kproto_documents (name, data) VALUES ('cluster_id', %s) ON CONFLICT DO NOTHING", (fresh,))
            row = conn.execute("SELECT data FROM kproto_documents WHERE name = 'cluster_id'").fetchone()
        assert row is not None
        return bytes(row[0]).decode()

    def open_partition(
        self, topic_id: uuid.UUID, topic: str, index: int, config: LogConfig, now_ms: int, work: BlockingWork, *,
        new: bool,
    ) -> Partition:
        return open_partition(self, topic_id, topic, index, config, now_ms, work, new=new)

    def discard_partition(self, topic_id: uuid.UUID, topic: str, index: int) -> None:
        """A new partition keeps nothing outside memory until its first commit."""

    def drop_partition(self, topic_id: uuid.UUID, index: int, work: BlockingWork) -> None:
        key = (topic_id, index)
        submit(work, lambda: self.queries.delete_partition(key))

    def sync(self, pending: list[FlushItem]) -> None:
        self.commit(pg_items(pending))

    def commit(self, items: list[PgCommit]) -> None:
        """One database transaction for every log's writes of a round."""
        if not items:
            return
        with self.leases.lock:
            self.leases.check_ownership()
        commit_round(self.pool, items, SHARD_LOCK_CLASS, self.leases.owner_pid)

    def committed_decisions(self, producer_ids: list[int]) -> dict[int, int]:
        """Worker thread: see ``PgQueries.committed_decisions``."""
        return self.queries.committed_decisions(producer_ids)

    def close(self) -> None:
        self.pool.close()
        self.leases.close()


__all__ = ["PostgresStorage", "StorageConflict", "StorageUnavailable"]
