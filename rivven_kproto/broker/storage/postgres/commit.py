"""A round's writes to PostgreSQL: each log's part (``PgCommit``), all in one database transaction.

Concurrent produce requests, markers on several partitions and coordinator entries become visible
together. A partition another broker claimed since (``StorageConflict``) is left out and marked
``fenced``: its writes are never acknowledged; the rest of the round commits.
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

log = logging.getLogger(__name__)


@dataclass
class PgCommit:
    """One log's part of a round's database transaction (a ``FlushItem``, as the native log's
    ``PendingFlush`` is)."""

    write: object  # Callable[[psycopg.Connection], None]
    end_offset: int = 0
    items: list[Any] = field(default_factory=list)  # what the commit carries (batches, log entries)
    kind: str = "segment"
    synced: bool = False
    fenced: bool = False  # another broker claimed the partition: these writes were refused
    seconds: float = 0.0

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


def commit_round(pool: PgPool, items: list[PgCommit]) -> None:
    """Worker thread: one database transaction for every log's writes of a round (the caller
    checked that this broker still owns what it writes)."""
    started = time.perf_counter()
    remaining = list(items)
    while True:
        try:
            with pool.connection() as conn, conn.transaction():
                for item in remaining:
                    write: Callable[[psycopg.Connection], None] = item.write  # type: ignore[assignment]
                    try:
                        write(conn)
                    except StorageConflict as exc:
                        exc.item = item
                        raise
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
