"""The brokers using one database: a row per broker process, kept fresh by its heartbeat.

A broker registers when it opens the database (``serving``, or ``standby`` while it waits to take
over) with its node id and advertised address, and refreshes ``heartbeat_at`` (the database's
clock, so brokers' clocks need not agree) about once a second; it deletes its row when it stops
cleanly. A row whose heartbeat is older than the session timeout is a broker that died or lost the
database: it is reported as not live, and rows long dead are removed by the next registration.
``kproto cluster members --storage URL`` reads this table.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

SESSION_TIMEOUT_S = 9.0  # Kafka's broker.session.timeout.ms default: no heartbeat for this long is not live
# A broker that lost its lock (killed, paused past its session, cut off) stays listed to clients for
# this long after its last heartbeat, leading and coordinating nothing: see departed_nodes.
LISTED_AFTER_LOSS_S = 60.0
FORGET_AFTER_S = 3600.0  # a row this stale is removed when any broker registers
SERVING, STANDBY, COORDINATOR = "serving", "standby", "coordinator"
NODE_LOCK_CLASS = 0x6B70  # advisory lock (class, node id): held by the broker serving as that node


@dataclass(frozen=True)
class Member:
    node_id: int
    host: str
    port: int
    role: str
    started_at: datetime
    heartbeat_age_s: float
    incarnation: uuid.UUID

    @property
    def live(self) -> bool:
        return self.heartbeat_age_s < SESSION_TIMEOUT_S


@dataclass
class Registration:
    """This broker's row: its identity, and the role and address it last reported."""

    node_id: int
    host: str
    port: int
    incarnation: uuid.UUID
    role: str = STANDBY
    peer_host: str | None = None  # the inter-broker listener's address (None: host, port)
    peer_port: int | None = None

    def beat(self, conn: psycopg.Connection[Any]) -> None:
        """Insert or refresh the row (one statement, autocommit or inside the caller's transaction)."""
        conn.execute(
            "INSERT INTO kproto_brokers (incarnation, node_id, host, port, role, peer_host, peer_port)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (incarnation) DO UPDATE SET host = EXCLUDED.host,"
            " port = EXCLUDED.port, role = EXCLUDED.role, peer_host = EXCLUDED.peer_host,"
            " peer_port = EXCLUDED.peer_port, heartbeat_at = now()",
            (self.incarnation, self.node_id, self.host, self.port, self.role, self.peer_host, self.peer_port),
        )

    def register(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("DELETE FROM kproto_brokers WHERE heartbeat_at < now() - make_interval(secs => %s)",
                     (FORGET_AFTER_S,))
        self.beat(conn)

    def leave(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("DELETE FROM kproto_brokers WHERE incarnation = %s", (self.incarnation,))


def members(conn: psycopg.Connection[Any]) -> list[Member]:
    """Every registered broker: live ones first, serving before standby, then by node id."""
    rows = conn.execute(
        "SELECT node_id, host, port, role, started_at, extract(epoch FROM now() - heartbeat_at), incarnation"
        " FROM kproto_brokers ORDER BY heartbeat_at < now() - make_interval(secs => %s), role = 'standby',"
        " node_id, started_at", (SESSION_TIMEOUT_S,)
    ).fetchall()
    return [Member(int(n), str(h), int(p), str(r), s, float(age), i) for n, h, p, r, s, age, i in rows]


# A row ``b`` of a broker serving now: a fresh heartbeat and the node's lock held (parameters: the
# session timeout, NODE_LOCK_CLASS).
_SERVING_NOW = (
    " b.role <> 'standby' AND b.heartbeat_at >= now() - make_interval(secs => %s)"
    " AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2"
    " AND l.classid::bigint = %s AND l.objid::bigint = (b.node_id::bigint & 4294967295)"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))"
)


def live_nodes(conn: psycopg.Connection[Any]) -> list[tuple[int, str, int, str, str | None, int | None]]:
    """The brokers serving now: a fresh heartbeat and the node's lock held (a broker's lock ends
    with its database session, so one killed leaves at once, not after the session timeout).
    (node id, host, port, role, inter-broker host, inter-broker port), by node id."""
    rows = conn.execute(
        "SELECT DISTINCT ON (b.node_id) b.node_id, b.host, b.port, b.role, b.peer_host, b.peer_port"
        " FROM kproto_brokers b WHERE" + _SERVING_NOW + " ORDER BY b.node_id, b.heartbeat_at DESC",
        (SESSION_TIMEOUT_S, NODE_LOCK_CLASS)
    ).fetchall()
    return [(int(n), str(h), int(p), str(r), None if ph is None else str(ph), None if pp is None else int(pp))
            for n, h, p, r, ph, pp in rows]


def departed_nodes(conn: psycopg.Connection[Any], live: set[int]) -> list[tuple[int, str, int]]:
    """Brokers that hold no lock now (killed, paused past their session, cut off from the
    database) but heartbeated within LISTED_AFTER_LOSS_S: (node id, host, port). They stay in
    Metadata, leading nothing. Kafka drops a broker once its session times out; librdkafka then
    decommissions its handle, and a request waiting for that broker as its cached coordinator
    waits until some other broker changes state (librdkafka#5511, the timeout unchecked: #5456):
    a broker back within the minute finds its clients' handles still alive instead."""
    rows = conn.execute(
        "SELECT DISTINCT ON (node_id) node_id, host, port FROM kproto_brokers WHERE role <> 'standby'"
        " AND heartbeat_at >= now() - make_interval(secs => %s) ORDER BY node_id, heartbeat_at DESC",
        (LISTED_AFTER_LOSS_S,)
    ).fetchall()
    return [(int(n), str(h), int(p)) for n, h, p in rows if int(n) not in live]


def acknowledge_catalog(conn: psycopg.Connection[Any], incarnation: uuid.UUID, digest: str) -> None:
    """This broker applied the topic catalog with this digest."""
    conn.execute("UPDATE kproto_brokers SET catalog_seen = %s WHERE incarnation = %s", (digest, incarnation))


def catalog_lagging(conn: psycopg.Connection[Any], digests: list[str], self_incarnation: uuid.UUID) -> list[int]:
    """Live serving brokers (but this one) that have applied none of the catalogs with these digests."""
    rows = conn.execute(
        "SELECT b.node_id FROM kproto_brokers b WHERE b.incarnation <> %s AND NOT coalesce(b.catalog_seen = ANY(%s),"
        " false) AND" + _SERVING_NOW, (self_incarnation, digests, SESSION_TIMEOUT_S, NODE_LOCK_CLASS)).fetchall()
    return [int(n) for (n,) in rows]
