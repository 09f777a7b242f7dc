"""What a workload cost the PostgreSQL server in work, not time: database commits, statements
(``pg_stat_statements``, BEGIN and COMMIT included), WAL bytes and rows written.

``python -m tools.bench.scaling`` reads these before and after each workload on its throwaway
server, so the cost per message and per transaction can be compared between 1 and 3 brokers and
between versions on a busy machine, where rates alone say little.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg

log = logging.getLogger(__name__)

SETTINGS = (
    "shared_preload_libraries = 'pg_stat_statements'\n"
    "pg_stat_statements.track = all\npg_stat_statements.track_utility = on\n"
    "pg_stat_statements.max = 1000\n"
)


def enable(server: Any) -> None:
    """Load pg_stat_statements into a ``rivven_kproto.testing.postgres`` server (restarts it)."""
    with (server.data_dir / "postgresql.conf").open("a") as conf:
        conf.write(SETTINGS)
    server.bounce()
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")


def position(conn: psycopg.Connection) -> tuple[int, int]:
    """(transaction ids handed out, one per writing transaction; the WAL insert position in bytes)
    of the whole server: both exact, where pg_stat_database and pg_stat_wal lag by up to a second."""
    xid, wal = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint,"
                            " (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint").fetchone() or (0, 0)
    return int(xid or 0), int(wal or 0)


def snapshot(url: str) -> dict[str, Any]:
    """Counters of the whole server now (every database: the brokers' is created per point)."""
    with psycopg.connect(url, autocommit=True) as conn:
        # pg_stat_statements misses a COMMIT sent in a pipeline: the transaction ids handed out,
        # the statements' rows and the WAL position are exact.
        commits, wal = position(conn)
        (rows,) = conn.execute(
            "SELECT coalesce(sum(rows) FILTER (WHERE query ~* '^\\s*(INSERT|UPDATE|DELETE|WITH)'), 0)::bigint"
            " FROM pg_stat_statements").fetchone() or (0,)
        by_query: dict[str, int] = dict(conn.execute(
            "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90), sum(calls)::bigint FROM pg_stat_statements"
            " WHERE query NOT LIKE '%%pg_stat%%' GROUP BY 1").fetchall())
    return {"commits": commits, "rows": int(rows or 0), "wal_bytes": wal, "by_query": by_query}


def cost(before: dict[str, Any], after: dict[str, Any], messages: int, transactions: int | None) -> dict[str, Any]:
    """The counters' growth, per message and per transaction (if the workload has them)."""
    statements = {q: n - before["by_query"].get(q, 0) for q, n in after["by_query"].items()}
    statements = {q: n for q, n in statements.items() if n > 0}
    out: dict[str, Any] = {
        "db_commits": after["commits"] - before["commits"], "db_rows": after["rows"] - before["rows"],
        "wal_bytes": after["wal_bytes"] - before["wal_bytes"], "statements": sum(statements.values()),
        "top_statements": dict(sorted(statements.items(), key=lambda kv: -kv[1])[:12]),
    }
    units = {"msg": messages, "txn": transactions or 0}
    for unit, count in units.items():
        if count:
            for key in ("db_commits", "statements", "wal_bytes", "db_rows"):
                out[f"{key}_per_{unit}"] = round(out[key] / count, 3)
    return out
