"""Node ids in a shared database: a broker's node id is an advisory lock its own session holds.

Two brokers never serve as one node id (the lock is the database's); a broker started without
``--node-id`` takes the lowest id whose lock is free, and gets the same one back after a restart.
"""

from __future__ import annotations

import psycopg

from ..errors import DatabaseInUse
from .registry import NODE_LOCK_CLASS

MAX_ASSIGNED_NODE_ID = 65535  # node ids tried when the database assigns one


def try_node_lock(owner: psycopg.Connection, node_id: int) -> bool:
    row = owner.execute("SELECT pg_try_advisory_lock(%s, %s)", (NODE_LOCK_CLASS, node_id)).fetchone()
    return bool(row is not None and row[0])


def lowest_free_node_id(owner: psycopg.Connection) -> int:
    """No --node-id: the lowest node id whose lock this session can take (a broker that
    restarts finds its old id free again; two brokers starting at once never get the same
    one, since the lock is the database's). Ids held now are skipped without a try."""
    rows = owner.execute(
        "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
        " AND classid::bigint = %s AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        (NODE_LOCK_CLASS,)).fetchall()
    held = {int(objid) for (objid,) in rows}
    for node_id in range(MAX_ASSIGNED_NODE_ID + 1):
        if node_id not in held and try_node_lock(owner, node_id):
            return node_id
    raise DatabaseInUse(f"every node id up to {MAX_ASSIGNED_NODE_ID} is held by a broker of this database")
