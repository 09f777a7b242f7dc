"""Issue #37 item 12 (part): the PostgreSQL password need not be on the command line (where
``ps`` shows it). libpq reads PGPASSWORD and PGPASSFILE (``~/.pgpass``) when the URL has no
password; the broker passes its URL to psycopg untouched, so both work.

On the session's throwaway server a role ``secured`` gets a password and a pg_hba line that asks
for it (scram-sha-256, ahead of the server's trust lines), and its own database. A broker started
with ``postgresql://secured@.../db`` and PGPASSWORD connects and serves; without it, it fails.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import Producer

from rivven_kproto.testing.postgres import PostgresServer

from .broker_process import BrokerProcess

TIMEOUT_S = 30
PASSWORD = "s3cret-pw"


@pytest.fixture
def secured_url(postgres_server: PostgresServer) -> str:
    """A role that must give a password, owning a fresh database; the URL without the password."""
    role, database = f"secured_{uuid.uuid4().hex[:8]}", f"db_{uuid.uuid4().hex[:12]}"
    hba = postgres_server.data_dir / "pg_hba.conf"
    with psycopg.connect(postgres_server.url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'".encode())
        conn.execute(f"CREATE DATABASE {database} OWNER {role}".encode())
        # pg_hba.conf belongs to the server's user; its first matching line wins.
        lines = f"host all {role} 127.0.0.1/32 scram-sha-256\n" + hba.read_text()
        hba.write_text(lines)
        conn.execute(b"SELECT pg_reload_conf()")
    return f"postgresql://{role}@127.0.0.1:{postgres_server.port}/{database}"


def test_the_password_comes_from_pgpassword(secured_url: str, tmp_path: Path) -> None:
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(secured_url, connect_timeout=10).close()  # the server does ask for it

    without = BrokerProcess(tmp_path / "without", tmp_path / "without.log", ["--storage", secured_url])
    with pytest.raises(RuntimeError, match="password"):  # it retries the refused login forever: stop at the first
        without.start(give_up_on="no password supplied")

    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--storage", secured_url],
                           env={"PGPASSWORD": PASSWORD}).start()
    try:
        delivered: list[object] = []
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("secured-topic", b"v", on_delivery=lambda err, _msg: delivered.append(err))
        assert producer.flush(TIMEOUT_S) == 0
        assert delivered == [None]
        assert broker.process is not None  # what ps shows:
        assert PASSWORD.encode() not in Path(f"/proc/{broker.process.pid}/cmdline").read_bytes()
    finally:
        assert broker.stop() == 0
