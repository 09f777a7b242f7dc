"""The PostgreSQL engine's queries of partition data: reads, ListOffsets by time, retention,
DeleteRecords, a deleted partition's rows, and the transactions' commit decisions.

Each runs on a worker thread (or on the loop, for the few reads that must: see partition.py) on a
connection of the pool; a partition's own writes go with the flusher's round (``commit``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator

from rivven_kproto.broker.log.partition import exact_record
from rivven_kproto.codec.enums import MAX_TIMESTAMP

from .pool import PgPool

log = logging.getLogger(__name__)

READ_PAGE_ROWS = 64
LOCATE_PAGE_ROWS = 1024  # sizes only: cheap rows


def take_batches(
    batches: Iterable[tuple[int, bytes]], max_bytes: int, upper_bound: int | None, min_one_batch: bool
) -> bytes:
    """Whole batches in offset order, none at or past ``upper_bound``, within ``max_bytes`` (the
    first one whole with ``min_one_batch``): what the native log's read returns."""
    parts: list[bytes] = []
    used = 0
    for base_offset, data in batches:
        if upper_bound is not None and base_offset >= upper_bound:
            break
        if used + len(data) > max_bytes and not (min_one_batch and not parts):
            break
        parts.append(data)
        used += len(data)
    return b"".join(parts)


class PgQueries:
    """The partition-data queries, on the engine's pool."""

    def __init__(self, pool: PgPool) -> None:
        self.pool = pool

    def committed_decisions(self, producer_ids: list[int]) -> dict[int, int]:
        """Worker thread: of these producers, those whose transaction is decided committed (its
        markers may still be on their way): producer id -> the epoch of the transaction's batches.
        Fails at once while the database is known to be down (the reads then wait for markers)."""
        self.pool.check_available()
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT producer_id, producer_epoch FROM kproto_txn_decisions WHERE producer_id = ANY(%s)",
                (producer_ids,)).fetchall()
        return {int(pid): int(epoch) for pid, epoch in rows}

    def read_batches(
        self, key: tuple[uuid.UUID, int], offset: int, max_bytes: int, upper_bound: int | None, min_one_batch: bool
    ) -> bytes:
        """Whole batches from the one holding ``offset``, selected by ``take_batches`` (the same
        rule as the in-memory tail), fetched a page of rows at a time until it stops."""
        bound = upper_bound if upper_bound is not None else 2**63 - 1
        with self.pool.connection() as conn:

            def rows() -> Iterator[tuple[int, bytes]]:
                start, budget = offset, max_bytes
                while True:
                    # Only the rows that start within the budget leave the server (sizes from the
                    # TOAST pointers): a page of whole rows sent ten times the bytes a 1 MiB fetch
                    # of small batches needed, and made cold reads crawl at a few MB/s.
                    page = conn.execute(
                        "SELECT base_offset, last_offset, data, size FROM (SELECT base_offset, last_offset, data,"
                        " octet_length(data) AS size, sum(octet_length(data)) OVER (ORDER BY base_offset)"
                        " - octet_length(data) AS before FROM kproto_batches WHERE topic_id = %s AND partition = %s"
                        " AND last_offset >= %s AND base_offset < %s ORDER BY base_offset LIMIT %s) AS page"
                        " WHERE before < %s OR before = 0 ORDER BY base_offset",
                        (*key, start, bound, READ_PAGE_ROWS, max(budget, 1)),
                    ).fetchall()
                    for base, last, data, size in page:
                        yield base, bytes(data)
                        start, budget = last + 1, budget - size
                    if len(page) < READ_PAGE_ROWS or budget <= 0:
                        return

            return take_batches(rows(), max_bytes, upper_bound, min_one_batch)

    def locate_batches(
        self, key: tuple[uuid.UUID, int], offset: int, max_bytes: int, upper_bound: int | None, min_one_batch: bool
    ) -> list[tuple[int, int, int]]:
        """The batches :meth:`read_batches` would return, as (base offset, next offset, size)
        rows: their sizes only (``octet_length`` reads the TOAST pointer), none of their bytes."""
        bound = upper_bound if upper_bound is not None else 2**63 - 1
        located: list[tuple[int, int, int]] = []
        used = 0
        with self.pool.connection() as conn:
            start = offset
            while True:
                page = conn.execute(
                    "SELECT base_offset, last_offset, octet_length(data) FROM kproto_batches WHERE topic_id = %s"
                    " AND partition = %s AND last_offset >= %s AND base_offset < %s ORDER BY base_offset LIMIT %s",
                    (*key, start, bound, LOCATE_PAGE_ROWS),
                ).fetchall()
                for base, last, size in page:
                    if used + size > max_bytes and not (min_one_batch and not located):
                        return located
                    located.append((base, last + 1, size))
                    used += size
                    start = last + 1
                if len(page) < LOCATE_PAGE_ROWS or used >= max_bytes:
                    return located

    def read_rows(self, key: tuple[uuid.UUID, int], first_base: int, last_base: int) -> list[tuple[int, bytes]]:
        """The batches whose base offsets lie in [first_base, last_base], in offset order."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT base_offset, data FROM kproto_batches WHERE topic_id = %s AND partition = %s"
                " AND base_offset BETWEEN %s AND %s ORDER BY base_offset",
                (*key, first_base, last_base),
            ).fetchall()
        return [(base, bytes(data)) for base, data in rows]

    def offset_lookup(self, key: tuple[uuid.UUID, int], start: int, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets by timestamp (or MAX_TIMESTAMP) over the committed batches, record-exact."""
        wanted: Callable[[int], bool]
        if timestamp == MAX_TIMESTAMP:
            found = self.pool.query_one(
                "SELECT base_offset, max_timestamp FROM kproto_batches WHERE topic_id = %s AND partition = %s"
                " AND last_offset >= %s ORDER BY max_timestamp DESC, base_offset LIMIT 1", (*key, start))
            target = found[1] if found is not None else 0
            wanted = lambda ts: ts == target  # noqa: E731
        else:
            found = self.pool.query_one(
                "SELECT base_offset, max_timestamp FROM kproto_batches WHERE topic_id = %s AND partition = %s"
                " AND last_offset >= %s AND max_timestamp >= %s ORDER BY base_offset LIMIT 1",
                (*key, start, timestamp))
            wanted = lambda ts: ts >= timestamp  # noqa: E731
        if found is None:
            return None
        data = self.read_batches(key, max(found[0], start), 1, None, True)
        return exact_record(data, start, wanted) or (max(found[0], start), found[1])

    def delete_below(self, key: tuple[uuid.UUID, int], offset: int) -> int:
        """DeleteRecords: the new log start first, then the batches wholly below it; bytes freed."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(
                "UPDATE kproto_partitions SET log_start_offset = greatest(log_start_offset, %s)"
                " WHERE topic_id = %s AND partition = %s", (offset, *key))
            freed = conn.execute(
                "DELETE FROM kproto_batches WHERE topic_id = %s AND partition = %s AND last_offset < %s"
                " RETURNING length(data)", (*key, offset)).fetchall()
        return sum(size for (size,) in freed)

    def retain(
        self, key: tuple[uuid.UUID, int], start: int, limit: int, cutoff: int | None, excess: int
    ) -> tuple[int, int]:
        """Retention: the new log start (never past ``limit``, the committed end) and the bytes
        freed; the rows below it are deleted in the same transaction."""
        new_start = start
        with self.pool.connection() as conn, conn.transaction():
            if cutoff is not None:
                row = conn.execute(
                    "SELECT min(base_offset) FROM kproto_batches WHERE topic_id = %s AND partition = %s"
                    " AND last_offset >= %s AND max_timestamp >= %s", (*key, start, cutoff)).fetchone()
                kept_from = row[0] if row is not None and row[0] is not None else limit
                new_start = max(new_start, min(kept_from, limit))
            if excess > 0:
                row = conn.execute(
                    "SELECT max(last_offset) + 1 FROM (SELECT last_offset, sum(length(data))"
                    " OVER (ORDER BY base_offset) AS total FROM kproto_batches WHERE topic_id = %s"
                    " AND partition = %s AND last_offset >= %s AND last_offset < %s) AS prefix WHERE total <= %s",
                    (*key, start, limit, excess)).fetchone()
                if row is not None and row[0] is not None:
                    new_start = max(new_start, min(int(row[0]), limit))
            if new_start <= start:
                return start, 0
            freed = conn.execute(
                "DELETE FROM kproto_batches WHERE topic_id = %s AND partition = %s AND last_offset < %s"
                " RETURNING length(data)", (*key, new_start)).fetchall()
            conn.execute(
                "UPDATE kproto_partitions SET log_start_offset = greatest(log_start_offset, %s)"
                " WHERE topic_id = %s AND partition = %s", (new_start, *key))
        log.info("retention: %s-%d starts at %d now", key[0], key[1], new_start)
        return new_start, sum(size for (size,) in freed)

    def delete_partition(self, key: tuple[uuid.UUID, int]) -> None:
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("DELETE FROM kproto_batches WHERE topic_id = %s AND partition = %s", key)
            conn.execute("DELETE FROM kproto_partitions WHERE topic_id = %s AND partition = %s", key)
            share_log = (f"share/{key[0]}/{key[1]}",)  # its share-state log (share_state_log.py), every group's
            conn.execute("DELETE FROM kproto_coordinator_log WHERE name = %s", share_log)
            conn.execute("DELETE FROM kproto_coordinator_snapshots WHERE name = %s", share_log)
