"""python -m tools.bench.pg_limits: what one PostgreSQL server does on this machine, measured with
pgbench, as the ceilings of the scaling model in docs/benchmarks.rst.

    python -m tools.bench.pg_limits                     # about 2 minutes
    python -m tools.bench.pg_limits --seconds 5 --json pg-limits.json

It starts a throwaway server with the settings the tests and the bench give it (``fsync`` and
``synchronous_commit`` on, 64 MB of shared buffers: ``rivven_kproto.testing.postgres``) and runs
three custom pgbench scripts (``-M prepared``) at several client counts, each for ``--seconds``:

- ``commit``: one one-row INSERT per transaction: database commits per second, the ceiling a
  broker's flusher rounds (one commit each) share;
- ``rows``: 1,000 rows per transaction: rows per second when commits are not the limit;
- ``bytes``: one 1 MiB bytea row (stored uncompressed) per transaction: WAL bytes per second.

Besides pgbench's own transactions per second it reads the server's WAL position and transaction
ids before and after, and the CPU time of the server's processes, so every figure is per second
and per commit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from rivven_kproto.testing.postgres import DATABASE, USER, PostgresServer, temporary_postgres

from . import pg_stats
from .__main__ import machine
from .procstats import tree_cpu_s
from .report import render_plain

log = logging.getLogger("tools.bench.pg_limits")

SETUP = (
    "CREATE TABLE lim_commit (id bigserial PRIMARY KEY, v int NOT NULL)",
    "CREATE TABLE lim_rows (id bigserial PRIMARY KEY, v int NOT NULL)",
    "CREATE TABLE lim_bytes (id bigserial PRIMARY KEY, v bytea NOT NULL)",
    "ALTER TABLE lim_bytes ALTER COLUMN v SET STORAGE EXTERNAL",  # no compression: the bytes reach the WAL
)
ROWS_PER_TXN = 1000
SCRIPTS: dict[str, tuple[str, int]] = {  # name: (script, rows per transaction)
    "commit": ("INSERT INTO lim_commit (v) VALUES (1);\n", 1),
    "rows": (f"INSERT INTO lim_rows (v) SELECT g FROM generate_series(1, {ROWS_PER_TXN}) g;\n", ROWS_PER_TXN),
    "bytes": ("INSERT INTO lim_bytes (v) VALUES (repeat('x', 1048576)::bytea);\n", 1),
}
CLIENTS = {"commit": (1, 8, 32), "rows": (1, 8), "bytes": (1, 8)}
TPS = re.compile(r"tps = ([0-9.]+)")


def counters(url: str) -> tuple[int, int]:
    """(transaction ids handed out, WAL insert position in bytes) of the whole server."""
    with psycopg.connect(url, autocommit=True) as conn:
        return pg_stats.position(conn)


def run_point(server: PostgresServer, name: str, clients: int, seconds: float, work: Path) -> dict[str, Any]:
    script, rows = SCRIPTS[name]
    path = work / f"{name}.sql"
    path.write_text(script)
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE lim_{name}".encode())
        conn.execute("CHECKPOINT")  # every point starts without a pending checkpoint's writes
    command = [str(server.bin_dir / "pgbench"), "-n", "-M", "prepared", "-f", str(path), "-c", str(clients),
               "-j", str(min(clients, 2)), "-T", str(max(1, round(seconds))), "-h", "127.0.0.1",
               "-p", str(server.port), "-U", USER, DATABASE]
    pid = server.postmaster_pid()
    xid0, wal0 = counters(server.url)
    cpu0, began = tree_cpu_s(pid), time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120)
    elapsed, cpu1 = time.monotonic() - began, tree_cpu_s(pid)
    xid1, wal1 = counters(server.url)
    found = TPS.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"pgbench failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    tps = float(found.group(1))
    commits = xid1 - xid0
    return {
        "script": name, "clients": clients, "seconds": round(elapsed, 2), "tps": round(tps, 1),
        "rows_per_s": round(tps * rows), "wal_mb_per_s": round((wal1 - wal0) / elapsed / 1e6, 2),
        "wal_bytes_per_commit": round((wal1 - wal0) / commits) if commits else None,
        "server_cpu_ms_per_commit": round(1000 * (cpu1 - cpu0) / commits, 3) if commits else None,
        "server_cores": round((cpu1 - cpu0) / elapsed, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.pg_limits", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="per point")
    parser.add_argument("--json", type=Path, default=Path("pg-limits.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    points: list[dict[str, Any]] = []
    with temporary_postgres() as server, tempfile.TemporaryDirectory(prefix="pg-limits-") as work:
        with psycopg.connect(server.url, autocommit=True) as conn:
            for statement in SETUP:
                conn.execute(statement.encode())
            version = str((conn.execute("SHOW server_version").fetchone() or ("?",))[0])
        for name, counts in CLIENTS.items():
            for clients in counts:
                point = run_point(server, name, clients, args.seconds, Path(work))
                log.info("%s", point)
                points.append(point)
    rows = [["script", "clients", "tx/s", "rows/s", "WAL MB/s", "WAL B/commit", "server CPU ms/commit", "server cores"]]
    for p in points:
        rows.append([p["script"], str(p["clients"]), f"{p['tps']:,.0f}", f"{p['rows_per_s']:,}", f"{p['wal_mb_per_s']}",
                     f"{p['wal_bytes_per_commit']:,}" if p["wal_bytes_per_commit"] else "",
                     str(p["server_cpu_ms_per_commit"]), str(p["server_cores"])])
    print(render_plain(rows))
    document = {"machine": {**machine(), "postgresql": version}, "seconds": args.seconds, "points": points,
                "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    args.json.write_text(json.dumps(document, indent=2))
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
