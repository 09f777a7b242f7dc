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

from rivven_kproto.broker.durable.work import BlockingWork, Document, submit
from rivven_kproto.broker.log.base import PartitionLogBase
from rivven_kproto.broker.log.config import LogConfig

from ...cluster import Node
from .. import Pulse, StorageConflict, StorageUnavailable
from .commit import PgCommit, commit_round
from .coordinator_log import PgDurableLog
from .leases import HEARTBEAT_S, PgLeases
from .partition import PgPartitionLog
from .pool import POOL_SIZE, PgPool, unavailable_on_error
from .queries import PgQueries
from .registry import (
    COORDINATOR,
    SERVING,
    SESSION_TIMEOUT_S,
    Registration,
    acknowledge_catalog,
    catalog_lagging,
    departed_nodes,
    live_nodes,
)
from .replication import warn_about_durability
from .schema import migrate

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
    heartbeat_interval_s: float | None = HEARTBEAT_S
    session_timeout_s: float | None = SESSION_TIMEOUT_S
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
    ) -> PgPartitionLog:
        return PgPartitionLog.open(self, topic_id, topic, index, config, now_ms, work, new=new)

    def discard_partition(self, topic_id: uuid.UUID, topic: str, index: int) -> None:
        """A new partition keeps nothing outside memory until its first commit."""

    def drop_partition(self, topic_id: uuid.UUID, index: int, work: BlockingWork) -> None:
        key = (topic_id, index)
        submit(work, lambda: self.queries.delete_partition(key))

    def sync(self, pending: list[Any]) -> None:
        self.commit(pending)

    def heartbeat(self, host: str, port: int, peer: tuple[str, int] | None = None) -> Pulse | None:
        """Worker thread, every ``heartbeat_interval_s``: refresh this broker's registry row, take
        the coordinator lease if its holder is gone, and read who serves, the topic catalog and
        the other documents' digests (md5 in the database: a few bytes each, whatever their size)."""
        registration, leases = self.registration, self.leases
        if registration is None:
            return None
        registration.host, registration.port = host, port
        registration.peer_host, registration.peer_port = peer if peer is not None else (None, None)
        try:
            leases.beat()
            registration.role = COORDINATOR if leases.coordinating else SERVING
            with self.pool.connection() as conn:
                registration.beat(conn)
                nodes = live_nodes(conn)
                departed = departed_nodes(conn, {node[0] for node in nodes} | {self.node_id})
                owners = leases.shard_owners(conn)
                row = conn.execute("SELECT data FROM kproto_documents WHERE name = 'topics.json'").fetchone()
                digests = conn.execute("SELECT name, md5(data) FROM kproto_documents WHERE name <> 'topics.json'").fetchall()
            live = sorted({node[0] for node in nodes} | {self.node_id})
            leases.take_shards(live, owners)
        except psycopg.Error as exc:
            raise StorageUnavailable(f"heartbeat: {exc}") from exc
        coordinator = next((n for n, _, _, role, _, _ in nodes if role == COORDINATOR), None)
        # The lease is taken over only after its holder has been gone for a few heartbeats in a
        # row: a holder killed is gone for good, one whose database restarted is back at once.
        leases.lease_unheld_beats = 0 if coordinator is not None or leases.coordinating else leases.lease_unheld_beats + 1
        if leases.coordinating:
            coordinator = self.node_id
        return Pulse(tuple(Node(n, h, p, ph, pp) for n, h, p, _, ph, pp in nodes), coordinator,
                     bytes(row[0]) if row else None, {str(name): str(digest) for name, digest in digests}, owners,
                     tuple(Node(n, h, p) for n, h, p in departed))

    def claims_lost(self, logs: list[PartitionLogBase]) -> list[PartitionLogBase]:
        """Worker thread, after this broker's claims may have lapsed (a pause, the database away):
        the partitions whose row another log claimed since these opened (one query for all)."""
        ours = [log_ for log_ in logs if isinstance(log_, PgPartitionLog)]
        if not ours:
            return []
        try:
            with self.pool.connection() as conn:
                rows = conn.execute(
                    "SELECT c.topic_id, c.partition FROM unnest(%s::uuid[], %s::int[], %s::uuid[])"
                    " AS c(topic_id, partition, writer) JOIN kproto_partitions p USING (topic_id, partition)"
                    " WHERE p.writer <> c.writer",
                    ([log_.key[0] for log_ in ours], [log_.key[1] for log_ in ours], [log_.writer for log_ in ours]),
                ).fetchall()
        except psycopg.Error as exc:
            raise StorageUnavailable(f"claims check: {exc}") from exc
        lost = {(topic_id, int(index)) for topic_id, index in rows}
        return [log_ for log_ in ours if log_.key in lost]

    def acknowledge_catalog(self, digest: str) -> None:
        """Worker thread: this broker applied the catalog with this digest."""
        if self.registration is None:
            return
        try:
            with self.pool.connection() as conn:
                acknowledge_catalog(conn, self.registration.incarnation, digest)
        except psycopg.Error as exc:
            raise StorageUnavailable(f"catalog acknowledgement: {exc}") from exc

    def catalog_lagging(self, digests: list[str]) -> list[int]:
        """Worker thread: the live brokers that have applied none of these catalogs yet."""
        if self.registration is None:
            return []
        try:
            with self.pool.connection() as conn:
                return catalog_lagging(conn, digests, self.registration.incarnation)
        except psycopg.Error as exc:
            raise StorageUnavailable(f"catalog check: {exc}") from exc

    def commit(self, items: list[PgCommit]) -> None:
        """One database transaction for every log's writes of a round."""
        if not items:
            return
        with self.leases.lock:
            self.leases.check_ownership()
        commit_round(self.pool, items)

    def committed_decisions(self, producer_ids: list[int]) -> dict[int, int]:
        """Worker thread: see ``PgQueries.committed_decisions``."""
        return self.queries.committed_decisions(producer_ids)

    def release_shard(self, shard: int) -> None:
        """Worker thread: hand a coordinator shard over (its pending writes were committed)."""
        self.leases.release_shard(shard)

    def close(self) -> None:
        if self.registration is not None:
            try:
                with self.pool.connection() as conn:
                    self.registration.leave(conn)
            except (StorageUnavailable, psycopg.Error):
                log.warning("could not remove this broker from the registry (its heartbeat will age out)")
        self.pool.close()
        self.leases.close()


__all__ = ["PostgresStorage", "StorageConflict", "StorageUnavailable"]
