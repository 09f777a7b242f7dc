"""The PostgreSQL schema, created and migrated at start by versioned migrations.

Every broker that starts runs :func:`migrate`; a transaction-scoped advisory lock makes brokers
that start together apply each migration exactly once (the others wait, then find it applied).
A migration is never edited once released: a change is a new entry at the end of ``MIGRATIONS``.
"""

from __future__ import annotations

import logging

import psycopg

log = logging.getLogger(__name__)

ADVISORY_LOCK_KEY = 0x6B70726F746F  # "kproto"

MIGRATIONS: list[str] = [
    # 1: catalog documents, counters, partition logs as batch rows, coordinator logs.
    """
    CREATE TABLE kproto_documents (
        name text PRIMARY KEY,
        data bytea NOT NULL
    );
    CREATE TABLE kproto_counters (
        name text PRIMARY KEY,
        value bigint NOT NULL
    );
    CREATE TABLE kproto_partitions (
        topic_id uuid NOT NULL,
        partition integer NOT NULL,
        log_start_offset bigint NOT NULL,
        next_offset bigint NOT NULL,
        writer uuid NOT NULL,
        PRIMARY KEY (topic_id, partition)
    );
    CREATE TABLE kproto_batches (
        topic_id uuid NOT NULL,
        partition integer NOT NULL,
        base_offset bigint NOT NULL,
        last_offset bigint NOT NULL,
        max_timestamp bigint NOT NULL,
        producer_id bigint NOT NULL,
        producer_epoch smallint NOT NULL,
        base_sequence integer NOT NULL,
        attributes smallint NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (topic_id, partition, base_offset)
    );
    CREATE INDEX kproto_batches_by_last_offset ON kproto_batches (topic_id, partition, last_offset);
    CREATE TABLE kproto_coordinator_log (
        name text NOT NULL,
        seq bigint NOT NULL,
        payload bytea NOT NULL,
        PRIMARY KEY (name, seq)
    );
    CREATE TABLE kproto_coordinator_snapshots (
        name text PRIMARY KEY,
        seq bigint NOT NULL,
        payloads bytea NOT NULL
    );
    """,
    # 2: the brokers using the database (registry.py).
    """
    CREATE TABLE kproto_brokers (
        incarnation uuid PRIMARY KEY,
        node_id integer NOT NULL,
        host text NOT NULL,
        port integer NOT NULL,
        role text NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now(),
        heartbeat_at timestamptz NOT NULL DEFAULT now()
    );
    """,
    # 3: the topic catalog each broker has applied (its digest), for changes to wait on.
    """
    ALTER TABLE kproto_brokers ADD COLUMN catalog_seen text;
    """,
    # 4: the address of each broker's inter-broker listener (NULL: its advertised address, as a
    # broker without this migration registers).
    """
    ALTER TABLE kproto_brokers ADD COLUMN peer_host text, ADD COLUMN peer_port integer;
    """,
    # 5: transactions whose commit is decided (PrepareCommit committed) while their markers may
    # not all be written yet: the producer id and the epoch of the transaction's batches. A leader
    # still waiting for its marker reads it here, so a commit is visible on every partition at once.
    """
    CREATE TABLE kproto_txn_decisions (
        producer_id bigint PRIMARY KEY,
        producer_epoch smallint NOT NULL
    );
    """,
    # 6: record batches are compressed with lz4, not pglz. A batch of uncompressed records repeats
    # its few bytes of record framing, so pglz does not give up early, compresses the whole batch
    # and throws the result away (under its 25% minimum): 60% of the server's CPU on a produce of
    # random 100-byte values (docs/benchmarks.rst, "The PostgreSQL engine"). A server built without lz4 (or
    # older than PostgreSQL 14) stores batches uncompressed, as Kafka stores what producers send.
    """
    DO $$
    BEGIN
        ALTER TABLE kproto_batches ALTER COLUMN data SET COMPRESSION lz4;
    EXCEPTION WHEN OTHERS THEN
        ALTER TABLE kproto_batches ALTER COLUMN data SET STORAGE EXTERNAL;
    END
    $$;
    """,
]


def migrate(conn: psycopg.Connection) -> int:
    """Apply the migrations this database lacks; returns the schema version now."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK_KEY,))
        conn.execute("CREATE TABLE IF NOT EXISTS kproto_schema_version (version integer PRIMARY KEY)")
        row = conn.execute("SELECT max(version) FROM kproto_schema_version").fetchone()
        current = row[0] if row is not None and row[0] is not None else 0
        if current > len(MIGRATIONS):
            raise RuntimeError(
                f"the database's schema is version {current}, newer than this broker knows ({len(MIGRATIONS)})"
            )
        for version in range(current + 1, len(MIGRATIONS) + 1):
            conn.execute(MIGRATIONS[version - 1].encode())
            conn.execute("INSERT INTO kproto_schema_version (version) VALUES (%s)", (version,))
            log.info("PostgreSQL schema migrated to version %d", version)
        return len(MIGRATIONS)
