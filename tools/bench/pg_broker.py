"""Our broker on the PostgreSQL engine, for the bench: a fresh database per start, then ``serve``.

``python -m tools.bench --peer postgresql`` starts one throwaway PostgreSQL server for the run
(``rivven_kproto.testing.postgres``) and runs this per broker start, so no round inherits another's
data. It execs ``kproto serve`` (same process id: the bench measures the broker, not PostgreSQL).
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid

import psycopg


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server-url", required=True, help="postgresql://USER@HOST:PORT/DB of the server")
    parser.add_argument("--port", required=True)
    parser.add_argument("--data", required=True)
    args = parser.parse_args()
    name = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(args.server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}".encode())
    url = args.server_url.rsplit("/", 1)[0] + "/" + name
    os.execv(sys.executable, [
        sys.executable, "-m", "rivven_kproto", "serve", "--listen", f"127.0.0.1:{args.port}",
        "--data-dir", args.data, "--storage", url, "--metrics", "127.0.0.1:0",
    ])


if __name__ == "__main__":
    main()
