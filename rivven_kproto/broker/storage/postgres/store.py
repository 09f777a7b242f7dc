"""The PostgreSQL engine: a connection pool used from worker threads, and the queries.

psycopg 3's synchronous API runs on the flusher's and Fetch's worker threads (trio has no native
driver); the event loop touches the database only while the broker opens (before it serves) and
for ListOffsets by timestamp of batches older than a partition's cache. A round's writes are one
database transaction (``commit``): concurrent produce requests, markers on several partitions and
coordinator entries become visible together. A lost connection raises ``StorageUnavailable``: the
flusher keeps the round's writes and retries, and nothing is acknowledged meanwhile.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from rivven_kproto.broker.durable.work import BlockingWork, Document, submit
from rivven_kproto.broker.log.base import PartitionLogBase, exact_record
from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.codec.enums import MAX_TIMESTAMP

from ...cluster import Node, ranked_for_shard
from .. import CoordinationLost, DatabaseInUse, Pulse, StorageUnavailable
from .coordinator_log import PgDurableLog
from .partition import PgCommit, PgPartitionLog, StorageConflict, take_batches
from .registry import (
    COORDINATOR,
    NODE_LOCK_CLASS,
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

POOL_SIZE = 8
CONNECT_TIMEOUT_S = 10.0
READ_PAGE_ROWS = 64
OWNER_LOCK_KEY = 0x6B70726F746F01  # the coordinator lease
OWNER_CHECK_S = 1.0
STANDBY_POLL_S = 0.25
HEARTBEAT_S = 1.0
LEASE_TAKEOVER_BEATS = 2  # heartbeats that find the coordinator lease (or a shard) unheld before taking it
SHARD_LOCK_CLASS = 0x6B73  # advisory lock (class, shard): held by the broker coordinating that shard
COORDINATOR_SHARDS = 16  # shards of a database created by this version (recorded in kproto_counters)
LEGACY_LOG_NAMES = ("groups", "txn")  # a database of the single-coordinator version: one shard, these logs
MAX_ASSIGNED_NODE_ID = 65535  # node ids tried when the database assigns one


@contextlib.contextmanager
def _unavailable_on_error(storage: PostgresStorage | None = None) -> Iterator[None]:
    try:
        yield
    except (psycopg.OperationalError, PoolTimeout) as exc:
        if storage is not None:
            storage.available = False
        unavailable = StorageUnavailable(f"PostgreSQL is unavailable: {exc}")
        unavailable.transient = _transient(exc)
        raise unavailable from exc


# SQLSTATE classes of a server that is not there yet or any more (starting up, shutting down, a
# failover under way, the connection refused or lost); anything else (a wrong password, a database
# that does not exist) will not change by waiting.
_TRANSIENT_SQLSTATES = ("57P", "08")


# What libpq says (without a SQLSTATE, when the connection itself is refused) of those that will not.
_PERMANENT_MESSAGES = ("does not exist", "authentication failed", "no pg_hba.conf entry")


def _transient(exc: Exception) -> bool:
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate is not None:
        return bool(sqlstate.startswith(_TRANSIENT_SQLSTATES))
    return not any(text in str(exc) for text in _PERMANENT_MESSAGES)


class PgDocument(Document):
    def __init__(self, storage: PostgresStorage, name: str) -> None:
        super().__init__(Path(f"postgresql:kproto_documents/{name}"))
        self.storage = storage
        self.name = name

    def read(self) -> bytes | None:
        row = self.storage.query_one("SELECT data FROM kproto_documents WHERE name = %s", (self.name,))
        return bytes(row[0]) if row is not None else None

    def save(self, work: BlockingWork | None, data: bytes) -> None:
        storage, name = self.storage, self.name

        def write() -> None:
            with storage.connection() as conn, conn.transaction():
                conn.execute(
                    "INSERT INTO kproto_documents (name, data) VALUES (%s, %s)"
                    " ON CONFLICT (name) DO UPDATE SET data = EXCLUDED.data", (name, data))

        submit(work, write, critical=True)


class PgBlocks:
    """Producer id blocks from one counter row: brokers sharing the database never share a block."""

    def __init__(self, storage: PostgresStorage) -> None:
        self.storage = storage

    def reserve(self, size: int) -> tuple[int, int]:
        with self.storage.connection() as conn, conn.transaction():
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
        self.node_id = node[0] if node is not None else 0
        # No --node-id: the lowest id whose node lock is free, taken at the first join and kept
        # (a join again after the database restarted takes the same one back).
        self._assign_node_id = assign_node_id and not standby
        self.assigned_node_id: int | None = None
        # False after a failure until a commit succeeds: reads on the event loop then fail at once
        # instead of waiting for the pool's connection timeout.
        self.available = True
        self.pool = ConnectionPool(url, min_size=1, max_size=pool_size, open=False, timeout=CONNECT_TIMEOUT_S,
                                   name="kproto")
        self._owner_checked = time.monotonic()
        self._owner_lock = threading.Lock()  # the session is checked from the flusher's and heartbeat's threads
        self.coordinating = False  # this broker holds the coordinator lease (see ``cluster``)
        self.lost_coordination = False  # it held the lease and another broker took it meanwhile
        self._lease_unheld_beats = 0  # heartbeats in a row that found no broker holding the lease
        # Coordinator shards this broker's session holds the lock of, and per shard the heartbeats
        # in a row that found it unheld (a shard is taken only by its preferred live broker, at
        # its first heartbeat or after LEASE_TAKEOVER_BEATS: a database restart is no race).
        self.coordinator_shards = 1
        self.shards_held: set[int] = set()
        self._shard_unheld_beats: dict[int, int] = {}
        self._beats = 0
        with _unavailable_on_error():
            self._owner = self._wait_for_ownership(url) if standby else self._join(url)
            if self.registration is not None:
                self.registration.node_id = self.node_id
            try:
                self.pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
                with self.connection() as conn:
                    migrate(conn)
                    warn_about_durability(conn)
                    self.coordinator_shards = self._shard_count(conn)
                    if self.registration is not None:
                        self.registration.role = COORDINATOR if self.coordinating else SERVING
                        self.registration.register(conn)
            except BaseException:
                self.pool.close()
                self._owner.close()
                raise

    def _wait_for_ownership(self, url: str) -> psycopg.Connection:
        """Standby: take the database once the broker serving it stops (its session, and with it
        the lock, ends when its process dies), or once the database is reachable. Meanwhile the
        standby is registered (and heartbeats) on a connection of its own."""
        waiting = False
        side: psycopg.Connection | None = None
        last_beat = 0.0
        leaving = threading.Event()

        def leave_at_exit() -> None:
            """A standby stopped while it waits (its thread is abandoned): remove its row."""
            leaving.set()
            if self.registration is not None:
                with contextlib.suppress(psycopg.Error), psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
                    self.registration.leave(conn)

        atexit.register(leave_at_exit)
        try:
            while True:
                try:
                    return self._take_ownership(url)
                except (DatabaseInUse, psycopg.OperationalError) as exc:
                    if not waiting:
                        log.info("standby: %s; taking over when that changes", exc)
                        waiting = True
                if self.registration is not None and time.monotonic() - last_beat >= HEARTBEAT_S and not leaving.is_set():
                    last_beat = time.monotonic()
                    try:
                        if side is None:
                            side = psycopg.connect(url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_S))
                            migrate(side)
                            self.registration.register(side)
                        else:
                            self.registration.beat(side)
                    except psycopg.Error:
                        if side is not None:
                            side.close()
                        side = None
                time.sleep(STANDBY_POLL_S)
        finally:
            atexit.unregister(leave_at_exit)
            if side is not None:
                side.close()

    def _join(self, url: str, *, lease: bool = True) -> psycopg.Connection:
        """A session of this broker's own for its life (like the data directory's lock): it holds
        the node id's lock (two brokers never share a node id) and, with ``lease`` and if no other
        broker holds it, the coordinator lease. Both end with the process, so a dead broker is
        seen at once."""
        owner = psycopg.connect(url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_S))
        try:
            if self._assign_node_id:
                self.node_id = self.assigned_node_id = self._lowest_free_node_id(owner)
                self._assign_node_id = False
                log.info("node id %d assigned from the database (the lowest that no serving broker holds)",
                         self.node_id)
            elif not self._try_node_lock(owner, self.node_id):
                raise DatabaseInUse(
                    f"another broker is serving this database as node {self.node_id} (brokers sharing a database need "
                    "distinct --node-id values; --standby waits to take over instead)")
            self.coordinating = lease and self._try_coordinator_lease(owner)
        except BaseException:
            owner.close()
            raise
        return owner

    @staticmethod
    def _try_node_lock(owner: psycopg.Connection, node_id: int) -> bool:
        row = owner.execute("SELECT pg_try_advisory_lock(%s, %s)", (NODE_LOCK_CLASS, node_id)).fetchone()
        return bool(row is not None and row[0])

    @classmethod
    def _lowest_free_node_id(cls, owner: psycopg.Connection) -> int:
        """No --node-id: the lowest node id whose lock this session can take (a broker that
        restarts finds its old id free again; two brokers starting at once never get the same
        one, since the lock is the database's). Ids held now are skipped without a try."""
        rows = owner.execute(
            "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
            " AND classid::bigint = %s AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (NODE_LOCK_CLASS,)).fetchall()
        held = {int(objid) for (objid,) in rows}
        for node_id in range(MAX_ASSIGNED_NODE_ID + 1):
            if node_id not in held and cls._try_node_lock(owner, node_id):
                return node_id
        raise DatabaseInUse(f"every node id up to {MAX_ASSIGNED_NODE_ID} is held by a broker of this database")

    def _take_ownership(self, url: str) -> psycopg.Connection:
        """Standby: this node's session with the coordinator lease, or DatabaseInUse."""
        owner = self._join(url)
        if not self.coordinating:
            owner.close()
            raise DatabaseInUse("another broker is serving this database (the coordinator lease is held)")
        return owner

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

    @staticmethod
    def _try_shard_lock(owner: psycopg.Connection, shard: int) -> bool:
        row = owner.execute("SELECT pg_try_advisory_lock(%s, %s)", (SHARD_LOCK_CLASS, shard)).fetchone()
        return bool(row is not None and row[0])

    def release_shard(self, shard: int) -> None:
        """Worker thread: hand a coordinator shard over (its pending writes were committed)."""
        with self._owner_lock:
            self.shards_held.discard(shard)
            self._shard_unheld_beats[shard] = 0
            try:
                self._owner.execute("SELECT pg_advisory_unlock(%s, %s)", (SHARD_LOCK_CLASS, shard))
            except psycopg.Error as exc:  # the session is gone, and the lock with it
                log.info("releasing coordinator shard %d: %s", shard, exc)
        log.info("node %d handed coordinator shard %d over", self.node_id, shard)

    def _take_shards(self, live: list[int], owners: dict[int, int]) -> None:
        """Heartbeat (under the owner lock): take the free shards this broker is preferred for."""
        first = self._beats == 0
        for shard in range(self.coordinator_shards):
            if shard in owners:
                self._shard_unheld_beats[shard] = 0
                continue
            beats = self._shard_unheld_beats.get(shard, 0) + 1
            self._shard_unheld_beats[shard] = beats
            if ranked_for_shard(live, shard)[0] != self.node_id or not (first or beats > LEASE_TAKEOVER_BEATS):
                continue
            if self._try_shard_lock(self._owner, shard):
                self.shards_held.add(shard)
                owners[shard] = self.node_id
                log.info("node %d took coordinator shard %d", self.node_id, shard)

    def shard_owners(self, conn: psycopg.Connection) -> dict[int, int]:
        """Who holds each coordinator shard's lock now: the node whose lock the same session holds."""
        rows = conn.execute(
            "SELECT s.objid::bigint, n.objid::bigint FROM pg_locks s JOIN pg_locks n ON n.pid = s.pid"
            " AND n.locktype = 'advisory' AND n.granted AND n.objsubid = 2 AND n.classid::bigint = %s"
            " AND n.database = s.database WHERE s.locktype = 'advisory' AND s.granted AND s.objsubid = 2"
            " AND s.classid::bigint = %s AND s.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (NODE_LOCK_CLASS, SHARD_LOCK_CLASS)).fetchall()
        return {int(shard): int(node) for shard, node in rows if int(shard) < self.coordinator_shards}

    @staticmethod
    def _try_coordinator_lease(owner: psycopg.Connection) -> bool:
        row = owner.execute("SELECT pg_try_advisory_lock(%s)", (OWNER_LOCK_KEY,)).fetchone()
        return bool(row is not None and row[0])

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        with _unavailable_on_error(self), self.pool.connection() as conn:
            yield conn

    def check_available(self) -> None:
        """Before a query on the event loop: fail fast while the database is known to be down."""
        if not self.available:
            raise StorageUnavailable("PostgreSQL is unavailable (the last attempt failed)")

    def query_one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        with self.connection() as conn:
            return conn.execute(sql.encode(), params).fetchone()

    # -- the engine's interface -------------------------------------------------------------------

    def document(self, name: str) -> PgDocument:
        return PgDocument(self, name)

    def coordinator_log(self, name: str, work: BlockingWork, shard: int = 0) -> PgDurableLog:
        return PgDurableLog(self, name, work, shard)

    def producer_id_blocks(self) -> PgBlocks:
        return PgBlocks(self)

    def cluster_id(self, node_id: int) -> str:
        fresh = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=").encode()
        with self.connection() as conn, conn.transaction():
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
        submit(work, lambda: self.delete_partition(key))

    def sync(self, pending: list[Any]) -> None:
        self.commit(pending)

    def heartbeat(self, host: str, port: int, peer: tuple[str, int] | None = None) -> Pulse | None:
        """Worker thread, every ``heartbeat_interval_s``: refresh this broker's registry row, take
        the coordinator lease if its holder is gone, and read who serves, the topic catalog and
        the other documents' digests (md5 in the database: a few bytes each, whatever their size)."""
        registration = self.registration
        if registration is None:
            return None
        registration.host, registration.port = host, port
        registration.peer_host, registration.peer_port = peer if peer is not None else (None, None)
        try:
            with self._owner_lock:
                self._check_ownership(force=True)
                if (not self.coordinating and self._lease_unheld_beats >= LEASE_TAKEOVER_BEATS
                        and self._try_coordinator_lease(self._owner)):
                    log.info("node %d took the coordinator lease", self.node_id)
                    self.coordinating = True
            registration.role = COORDINATOR if self.coordinating else SERVING
            with self.connection() as conn:
                registration.beat(conn)
                nodes = live_nodes(conn)
                departed = departed_nodes(conn, {node[0] for node in nodes} | {self.node_id})
                owners = self.shard_owners(conn)
                row = conn.execute("SELECT data FROM kproto_documents WHERE name = 'topics.json'").fetchone()
                digests = conn.execute("SELECT name, md5(data) FROM kproto_documents WHERE name <> 'topics.json'").fetchall()
            live = sorted({node[0] for node in nodes} | {self.node_id})
            with self._owner_lock:
                for shard in self.shards_held:
                    owners[shard] = self.node_id
                self._take_shards(live, owners)
                self._beats += 1
        except psycopg.Error as exc:
            raise StorageUnavailable(f"heartbeat: {exc}") from exc
        coordinator = next((n for n, _, _, role, _, _ in nodes if role == COORDINATOR), None)
        # The lease is taken over only after its holder has been gone for a few heartbeats in a
        # row: a holder killed is gone for good, one whose database restarted is back at once.
        self._lease_unheld_beats = 0 if coordinator is not None or self.coordinating else self._lease_unheld_beats + 1
        if self.coordinating:
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
            with self.connection() as conn:
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
            with self.connection() as conn:
                acknowledge_catalog(conn, self.registration.incarnation, digest)
        except psycopg.Error as exc:
            raise StorageUnavailable(f"catalog acknowledgement: {exc}") from exc

    def catalog_lagging(self, digests: list[str]) -> list[int]:
        """Worker thread: the live brokers that have applied none of these catalogs yet."""
        if self.registration is None:
            return []
        try:
            with self.connection() as conn:
                return catalog_lagging(conn, digests, self.registration.incarnation)
        except psycopg.Error as exc:
            raise StorageUnavailable(f"catalog check: {exc}") from exc

    def _check_ownership(self, *, force: bool = False) -> None:
        """Worker thread, before a commit (at most every OWNER_CHECK_S) and each heartbeat: the
        locks live on their own session, lost with it when the database restarts; take them
        again. A broker that coordinated and finds the lease taken by another meanwhile must stop
        (its coordinators' state is no longer the truth): CoordinationLost."""
        if not force and time.monotonic() - self._owner_checked < OWNER_CHECK_S:
            return
        try:
            self._owner.execute("SELECT 1")
        except psycopg.Error:
            self._owner.close()
            was_coordinating = self.coordinating
            with _unavailable_on_error(self):
                # Only the broker that held the lease takes it again at once: after the database
                # restarted, the others wait for it (``heartbeat``) rather than race it.
                self._owner = self._join(self.url, lease=was_coordinating)
                # The shards it held too (nobody takes a free shard before LEASE_TAKEOVER_BEATS).
                lost = {shard for shard in self.shards_held if not self._try_shard_lock(self._owner, shard)}
            if lost:
                self.lost_coordination = True
                log.error("node %d lost coordinator shards %s to another broker", self.node_id, sorted(lost))
            log.info("PostgreSQL: ownership of the database taken again after a lost connection (node %d)", self.node_id)
            if was_coordinating and not self.coordinating:
                self.lost_coordination = True
        if self.lost_coordination:
            raise CoordinationLost(
                f"node {self.node_id} lost the coordinator lease or coordinator shards to another broker while the "
                "database was away; "
                "stopping (restart it to serve again)")
        self._owner_checked = time.monotonic()

    def check_shard_lease(self, conn: psycopg.Connection, shard: int) -> None:
        """In a commit's transaction: this broker's session holds the coordinator shard's lock now
        (the fencing of a coordinator log's writes: a broker that lost the shard changes nothing)."""
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
            " AND pid = %s AND classid::bigint = %s AND objid::bigint = %s)",
            (self._owner.info.backend_pid, SHARD_LOCK_CLASS, shard)).fetchone()
        if row is None or not row[0]:
            self.lost_coordination = True
            raise CoordinationLost(f"node {self.node_id} writes coordinator shard {shard} without holding its lock")

    def commit(self, items: list[PgCommit]) -> None:
        """One database transaction for every log's writes of a round."""
        if not items:
            return
        with self._owner_lock:
            self._check_ownership()
        started = time.perf_counter()
        remaining = list(items)
        while True:
            try:
                with self.connection() as conn, conn.transaction():
                    for item in remaining:
                        write: Callable[[psycopg.Connection], None] = item.write  # type: ignore[assignment]
                        try:
                            write(conn)
                        except StorageConflict as exc:
                            exc.item = item
                            raise
                break
            except StorageConflict as exc:
                # A partition another broker claimed since: the rest of the round commits without
                # it; its writes are never acknowledged (the flusher releases the partition).
                log.warning("%s; the partition moved to another broker", exc)
                assert exc.item is not None
                exc.item.fenced = True
                remaining.remove(exc.item)
        seconds = time.perf_counter() - started
        self.available = True
        for item in remaining:
            item.synced, item.seconds = True, seconds

    def committed_decisions(self, producer_ids: list[int]) -> dict[int, int]:
        """Worker thread: of these producers, those whose transaction is decided committed (its
        markers may still be on their way): producer id -> the epoch of the transaction's batches.
        Fails at once while the database is known to be down (the reads then wait for markers)."""
        self.check_available()
        with self.connection() as conn:
            rows = conn.execute(
                "SELECT producer_id, producer_epoch FROM kproto_txn_decisions WHERE producer_id = ANY(%s)",
                (producer_ids,)).fetchall()
        return {int(pid): int(epoch) for pid, epoch in rows}

    def read_batches(
        self, key: tuple[uuid.UUID, int], offset: int, max_bytes: int, upper_bound: int | None, min_one_batch: bool
    ) -> bytes:
        """Whole batches from the one holding ``offset``, selected by ``take_batches`` (the same
        rule as the in-memory tail), fetched a page of rows at a time until it stops."""
        bound = upper_bound if upper_bound is not None else 2**63 - 1
        with self.connection() as conn:

            def rows() -> Iterator[tuple[int, bytes]]:
                start, budget = offset, max_bytes
                while True:
                    # Only the rows that start within the budget leave the server (sizes from the
                    # TOAST pointers): a page of whole rows sent ten times the bytes a 1 MiB fetch
                    # of small batches needed, and made cold reads crawl at a few MB/s.
                    page = conn.execute(
                        "SELECT base_offset, last_offset, data, size FROM (SELECT base_offset, last_offset, data,"
                        " octet_length(data) AS size, sum(octet_length(data)) OVER (ORDER BY base_offset)"
                        " - octet_length(data) AS before FROM kproto_batches WHERE topic_id = %s AND partition = %s"
                        " AND last_offset >= %s AND base_offset < %s ORDER BY base_offset LIMIT %s) AS page"
                        " WHERE before < %s OR before = 0 ORDER BY base_offset",
                        (*key, start, bound, READ_PAGE_ROWS, max(budget, 1)),
                    ).fetchall()
                    for base, last, data, size in page:
                        yield base, bytes(data)
                        start, budget = last + 1, budget - size
                    if len(page) < READ_PAGE_ROWS or budget <= 0:
                        return

            return take_batches(rows(), max_bytes, upper_bound, min_one_batch)

    def offset_lookup(self, key: tuple[uuid.UUID, int], start: int, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets by timestamp (or MAX_TIMESTAMP) over the committed batches, record-exact."""
        wanted: Callable[[int], bool]
        if timestamp == MAX_TIMESTAMP:
            found = self.query_one(
                "SELECT base_offset, max_timestamp FROM kproto_batches WHERE topic_id = %s AND partition = %s"
                " AND last_offset >= %s ORDER BY max_timestamp DESC, base_offset LIMIT 1", (*key, start))
            target = found[1] if found is not None else 0
            wanted = lambda ts: ts == target  # noqa: E731
        else:
            found = self.query_one(
                "SELECT base_offset, max_timestamp FROM kproto_batches WHERE topic_id = %s AND partition = %s"
                " AND last_offset >= %s AND max_timestamp >= %s ORDER BY base_offset LIMIT 1",
                (*key, start, timestamp))
            wanted = lambda ts: ts >= timestamp  # noqa: E731
        if found is None:
            return None
        data = self.read_batches(key, max(found[0], start), 1, None, True)
        return exact_record(data, start, wanted) or (max(found[0], start), found[1])

    def delete_below(self, key: tuple[uuid.UUID, int], offset: int) -> int:
        """DeleteRecords: the new log start first, then the batches wholly below it; bytes freed."""
        with self.connection() as conn, conn.transaction():
            conn.execute(
                "UPDATE kproto_partitions SET log_start_offset = greatest(log_start_offset, %s)"
                " WHERE topic_id = %s AND partition = %s", (offset, *key))
            freed = conn.execute(
                "DELETE FROM kproto_batches WHERE topic_id = %s AND partition = %s AND last_offset < %s"
                " RETURNING length(data)", (*key, offset)).fetchall()
        return sum(size for (size,) in freed)

    def retain(
        self, key: tuple[uuid.UUID, int], start: int, limit: int, cutoff: int | None, excess: int
    ) -> tuple[int, int]:
        """Retention: the new log start (never past ``limit``, the committed end) and the bytes
        freed; the rows below it are deleted in the same transaction."""
        new_start = start
        with self.connection() as conn, conn.transaction():
            if cutoff is not None:
                row = conn.execute(
                    "SELECT min(base_offset) FROM kproto_batches WHERE topic_id = %s AND partition = %s"
                    " AND last_offset >= %s AND max_timestamp >= %s", (*key, start, cutoff)).fetchone()
                kept_from = row[0] if row is not None and row[0] is not None else limit
                new_start = max(new_start, min(kept_from, limit))
            if excess > 0:
                row = conn.execute(
                    "SELECT max(last_offset) + 1 FROM (SELECT last_offset, sum(length(data))"
                    " OVER (ORDER BY base_offset) AS total FROM kproto_batches WHERE topic_id = %s"
                    " AND partition = %s AND last_offset >= %s AND last_offset < %s) AS prefix WHERE total <= %s",
                    (*key, start, limit, excess)).fetchone()
                if row is not None and row[0] is not None:
                    new_start = max(new_start, min(int(row[0]), limit))
            if new_start <= start:
                return start, 0
            freed = conn.execute(
                "DELETE FROM kproto_batches WHERE topic_id = %s AND partition = %s AND last_offset < %s"
                " RETURNING length(data)", (*key, new_start)).fetchall()
            conn.execute(
                "UPDATE kproto_partitions SET log_start_offset = greatest(log_start_offset, %s)"
                " WHERE topic_id = %s AND partition = %s", (new_start, *key))
        log.info("retention: %s-%d starts at %d now", key[0], key[1], new_start)
        return new_start, sum(size for (size,) in freed)

    def delete_partition(self, key: tuple[uuid.UUID, int]) -> None:
        with self.connection() as conn, conn.transaction():
            conn.execute("DELETE FROM kproto_batches WHERE topic_id = %s AND partition = %s", key)
            conn.execute("DELETE FROM kproto_partitions WHERE topic_id = %s AND partition = %s", key)

    def close(self) -> None:
        if self.registration is not None:
            try:
                with self.connection() as conn:
                    self.registration.leave(conn)
            except (StorageUnavailable, psycopg.Error):
                log.warning("could not remove this broker from the registry (its heartbeat will age out)")
        self.pool.close()
        self._owner.close()


__all__ = ["PostgresStorage", "StorageConflict", "StorageUnavailable"]
