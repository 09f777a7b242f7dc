"""The PostgreSQL engine's connection pool, used from worker threads, and whether the database is up.

psycopg 3's synchronous API runs on the flusher's and Fetch's worker threads (trio has no native
driver). A lost connection raises ``StorageUnavailable`` (``transient`` unless waiting cannot help):
the flusher keeps the round's writes and retries; reads on the event loop fail at once while the
last attempt failed (``check_available``) instead of waiting for the pool's connection timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import StorageUnavailable

POOL_SIZE = 8
CONNECT_TIMEOUT_S = 10.0
SESSION_OPTIONS = "-c lock_timeout=10s -c idle_in_transaction_session_timeout=60s"

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


@contextlib.contextmanager
def unavailable_on_error(pool: PgPool | None = None) -> Iterator[None]:
    """psycopg's connection errors as ``StorageUnavailable`` (and ``pool`` marked unavailable)."""
    try:
        yield
    except (psycopg.OperationalError, PoolTimeout) as exc:
        if pool is not None:
            pool.available = False
        unavailable = StorageUnavailable(f"PostgreSQL is unavailable: {exc}")
        unavailable.transient = _transient(exc)
        raise unavailable from exc


class PgPool:
    def __init__(self, url: str, size: int = POOL_SIZE) -> None:
        self.url = url
        # False after a failure until a commit succeeds: reads on the event loop then fail at once
        # instead of waiting for the pool's connection timeout.
        self.available = True
        # A statement waiting on a row lock, or a session left idle inside a transaction, fails
        # after a while instead of holding every acknowledgement of the round behind it (the
        # round is retried, and the wait is in the log).
        self.pool = ConnectionPool(url, min_size=1, max_size=size, open=False, timeout=CONNECT_TIMEOUT_S,
                                   name="kproto", kwargs={"options": SESSION_OPTIONS})

    def open(self) -> None:
        self.pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        with unavailable_on_error(self), self.pool.connection() as conn:
            yield conn

    def check_available(self) -> None:
        """Before a query on the event loop: fail fast while the database is known to be down."""
        if not self.available:
            raise StorageUnavailable("PostgreSQL is unavailable (the last attempt failed)")

    def query_one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        with self.connection() as conn:
            return conn.execute(sql.encode(), params).fetchone()

    def close(self) -> None:
        self.pool.close()
