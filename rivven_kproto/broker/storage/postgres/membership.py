"""Cluster membership of brokers sharing a PostgreSQL database (``ClusterMembership``).

Each broker's heartbeat refreshes its row in the registry (registry.py), takes the coordinator
lease or free coordinator shards when their holder is gone (leases.py), and reads who serves, the
topic catalog and the other documents' digests. Claims on partitions are the ``writer`` of their
rows (partition.py): a broker whose claims may have lapsed checks them here.
"""

from __future__ import annotations

import logging

import psycopg

from rivven_kproto.broker.log.partition import Partition

from ...cluster import Node
from ...membership import Pulse
from ..errors import StorageUnavailable
from .leases import HEARTBEAT_S
from .partition import PgEngineLog
from .registry import (
    COORDINATOR,
    SERVING,
    SESSION_TIMEOUT_S,
    acknowledge_catalog,
    catalog_lagging,
    departed_nodes,
    live_nodes,
)
from .store import PostgresStorage

log = logging.getLogger(__name__)


class PgMembership:
    heartbeat_interval_s: float | None = HEARTBEAT_S
    session_timeout_s: float | None = SESSION_TIMEOUT_S

    def __init__(self, storage: PostgresStorage) -> None:
        self.pool = storage.pool
        self.leases = storage.leases  # the session whose locks are this broker's leadership
        self.registration = storage.registration
        self.node_id = storage.node_id
        self.assigned_node_id = storage.assigned_node_id

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

    def claims_lost(self, logs: list[Partition]) -> list[Partition]:
        """Worker thread, after this broker's claims may have lapsed (a pause, the database away):
        the partitions whose row another log claimed since these opened (one query for all)."""
        ours = [(log_, log_.engine) for log_ in logs if isinstance(log_.engine, PgEngineLog)]
        if not ours:
            return []
        try:
            with self.pool.connection() as conn:
                rows = conn.execute(
                    "SELECT c.topic_id, c.partition FROM unnest(%s::uuid[], %s::int[], %s::uuid[])"
                    " AS c(topic_id, partition, writer) JOIN kproto_partitions p USING (topic_id, partition)"
                    " WHERE p.writer <> c.writer",
                    ([e.key[0] for _, e in ours], [e.key[1] for _, e in ours], [e.writer for _, e in ours]),
                ).fetchall()
        except psycopg.Error as exc:
            raise StorageUnavailable(f"claims check: {exc}") from exc
        lost = {(topic_id, int(index)) for topic_id, index in rows}
        return [log_ for log_, engine in ours if engine.key in lost]

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
