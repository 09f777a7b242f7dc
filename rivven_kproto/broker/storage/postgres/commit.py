"""A round's writes to PostgreSQL: each log's part (``PgCommit``), all in one database transaction.

Concurrent produce requests, markers on several partitions and coordinator entries become visible
together. A partition another broker claimed since (``StorageConflict``) is left out and marked
``fenced``: its writes are never acknowledged; the rest of the round commits.

A round costs two round trips whatever it holds: BEGIN and the round's multi-row statements
(``RoundWrites``, which the partitions' and coordinator logs' ``stage`` fill) in one pipeline,
their answers checked, then COMMIT. A log that writes with statements of its own (``write``, run
after them in the same transaction) adds its round trips.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from rivven_kproto.broker.durable.flush import FlushItem

from ..errors import StorageConflict
from .pool import PgPool
from .round_writes import RoundWrites

log = logging.getLogger(__name__)


@dataclass
class PgCommit:
    """One log's part of a round's database transaction (a ``FlushItem``, as the native log's
    ``PendingFlush`` is)."""

    write: object = None  # Callable[[psycopg.Connection], None]: statements of its own, or None
    end_offset: int = 0
    items: list[Any] = field(default_factory=list)  # what the commit carries (batches, log entries)
    kind: str = "segment"
    synced: bool = False
    fenced: bool = False  # another broker claimed the partition: these writes were refused
    seconds: float = 0.0
    stage: Callable[[RoundWrites, PgCommit], None] | None = None  # adds its rows to the round's statements

    def release(self) -> None:
        pass


def pg_items(items: Iterable[FlushItem]) -> list[PgCommit]:
    """The round's items as this engine's (another engine's item here would be a wiring error)."""
    commits: list[PgCommit] = []
    for item in items:
        if not isinstance(item, PgCommit):
            raise TypeError(f"the PostgreSQL engine cannot commit {type(item).__name__}")
        commits.append(item)
    return commits


def commit_round(pool: PgPool, items: list[PgCommit], shard_lock_class: int = 0) -> None:
    """Worker thread: one database transaction for every log's writes of a round (the caller
    checked that this broker still owns what it writes)."""
    started = time.perf_counter()
    remaining = list(items)
    while True:
        try:
            with pool.connection() as conn:
                _write_round(conn, remaining, shard_lock_class)
            break
        except StorageConflict as exc:
            # A partition another broker claimed since: the rest of the round commits without
            # it; its writes are never acknowledged (the flusher releases the partition).
            log.warning("%s; the partition moved to another broker", exc)
            assert exc.item is not None
            exc.item.fenced = True
            remaining.remove(exc.item)
    seconds = time.perf_counter() - started
    pool.available = True
    for item in remaining:
        item.synced, item.seconds = True, seconds


def _write_round(conn: psycopg.Connection, items: list[PgCommit], shard_lock_class: int) -> None:
    """Two round trips: BEGIN and the staged statements in one pipeline, whose answers are
    checked; then COMMIT. Anything raised rolls back. (BEGIN and COMMIT are ours: psycopg's own
    BEGIN would cost a round trip of its own in pipeline mode.)"""
    conn.autocommit = True
    try:
        with conn.pipeline() as pipeline:
            conn.execute("BEGIN")
            staged = RoundWrites(shard_lock_class)
            for item in items:
                if item.stage is not None:
                    item.stage(staged, item)
            staged.send(conn)
            pipeline.sync()
            staged.verify()
            for item in items:
                if item.write is None:
                    continue
                write: Callable[[psycopg.Connection], None] = item.write  # type: ignore[assignment]
                try:
                    write(conn)
                except StorageConflict as exc:
                    exc.item = item
                    raise
            conn.execute("COMMIT")  # answered with the pipeline's closing sync
    except BaseException:
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
        raise
    finally:
        if not conn.closed:
            conn.autocommit = False
