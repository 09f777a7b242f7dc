"""A round's writes to PostgreSQL: each log's part (``PgCommit``), all in one database transaction.

Concurrent produce requests, markers on several partitions and coordinator entries become visible
together. A partition another broker claimed since (``StorageConflict``) is left out and marked
``fenced``: its writes are never acknowledged; the rest of the round commits.

A round costs two round trips and one statement (plus BEGIN and COMMIT) whatever it holds
(``RoundWrites``, which the partitions' and coordinator logs' ``stage`` fill). A log that writes
with statements of its own (``write``, run after it in the same transaction) adds its own.
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


def commit_round(pool: PgPool, items: list[PgCommit], shard_lock_class: int = 0, owner_pid: int = 0) -> None:
    """Worker thread: one database transaction for every log's writes of a round (the caller
    checked that this broker still owns what it writes)."""
    started = time.perf_counter()
    remaining = list(items)
    while True:
        try:
            with pool.connection() as conn:
                refused = _write_round(conn, remaining, shard_lock_class, owner_pid)
            break
        except StorageConflict as exc:
            # A log with statements of its own found its partition claimed: the round is written
            # again without it.
            log.warning("%s; the partition moved to another broker", exc)
            assert exc.item is not None
            exc.item.fenced = True
            remaining.remove(exc.item)
    for item in refused:
        # A partition another broker claimed since: the rest of the round committed without it;
        # its writes are never acknowledged (the flusher releases the partition).
        item.fenced = True
        remaining.remove(item)
    seconds = time.perf_counter() - started
    pool.available = True
    for item in remaining:
        item.synced, item.seconds = True, seconds


def _write_round(conn: psycopg.Connection, items: list[PgCommit], shard_lock_class: int,
                 owner_pid: int) -> list[PgCommit]:
    """BEGIN and the staged rows' one statement in a pipeline (one round trip), its answer
    checked, a log's statements of its own (``write``), then COMMIT (the second). COMMIT goes only
    after the answer: a broker killed while its statement waits (a lock) leaves nothing committed.
    The items refused. (BEGIN is ours: psycopg's own costs a round trip of its own in a pipeline.)"""
    staged = RoundWrites(shard_lock_class, owner_pid)
    for item in items:
        if item.stage is not None:
            item.stage(staged, item)
    conn.autocommit = True
    try:
        with conn.pipeline():
            conn.execute("BEGIN")
            cursor = staged.send(conn)
        refused: list[PgCommit] = staged.verify(cursor)  # type: ignore[assignment]
        for item in items:
            if item.write is None:
                continue
            write: Callable[[psycopg.Connection], None] = item.write  # type: ignore[assignment]
            try:
                write(conn)
            except StorageConflict as exc:
                exc.item = item
                raise
        conn.execute("COMMIT")
        return refused
    except BaseException:
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
        raise
    finally:
        if not conn.closed:
            conn.autocommit = False
