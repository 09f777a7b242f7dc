"""A partition log kept in PostgreSQL: one row per batch, the producer's bytes as written.

The partition rules (validation, offsets, the idempotence and transaction checks, markers, the
consumer's view) are ``Partition``'s, as for the native log: ``open_partition`` builds a
``Partition`` holding a ``PgEngineLog`` (an ``EngineLog``). What differs is where batches go: an append is stamped and applied in memory on the event loop (so the producer-state checks see
every earlier batch), kept in ``_pending``, and written by the server's flusher in one database
transaction with the round's other writes (``begin_flush`` / ``PostgresStorage.commit``). A
produce is answered only after that commit, so the database holds everything acknowledged and a
killed broker loses nothing acknowledged. Opening a partition claims its row (``writer``); the
commit moves the row's ``next_offset`` from the value this log last committed to the new end, and
fails when another log claimed the row since: a second writer (a broker that led the partition
before another took it over) is refused, never interleaved.

Transactions: the last stable offset counts a marker once it is committed, and also passes a
transaction whose coordinator (on another broker, perhaps) has committed its decision to the
database while this leader's marker is still on its way (``undecided_transactions`` names what a
read_committed read waits for, the server reads the decisions, ``learn_committed``): a commit
becomes visible on all of its partitions at once, whichever broker leads them.

Reads of recent batches are served from ``_cache`` (the newest ``cache_bytes`` of the log, and
everything not committed yet); older ones are read from the database, on a worker thread for a
Fetch (``plan_cold_read``). Opening a partition reads its row and replays its batches' headers
(control batches whole) to rebuild the producer state.
"""

from __future__ import annotations

import bisect
import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rivven_kproto.broker.durable.work import BlockingWork, submit
from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.engine import Batches, EngineLog, ReadResult, Refused, visible_end
from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.broker.log.producer_state import ProducerStateManager, replay_marker
from rivven_kproto.broker.log.region import ZERO_COPY_MIN_BYTES, HeldBatches
from rivven_kproto.codec.enums import MAX_TIMESTAMP, IsolationLevel
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.records.batch import CONTROL_MASK, HEADER_SIZE, parse_header

from .commit import PgCommit
from .engine import PgEngine
from .queries import take_batches
from .region import PgRegion
from .round_writes import RoundWrites

log = logging.getLogger(__name__)

CACHE_BYTES = 4 * 1024 * 1024  # the newest bytes of each partition kept in memory for reads
# Opening a partition makes this log its writer: a commit of the log that wrote it before (a
# broker that led it, or this broker before a restart) is refused from then on.
_CLAIM = (
    "INSERT INTO kproto_partitions (topic_id, partition, log_start_offset, next_offset, writer)"
    " VALUES (%s, %s, 0, 0, %s) ON CONFLICT (topic_id, partition) DO UPDATE SET writer = EXCLUDED.writer"
    " RETURNING log_start_offset, next_offset"
)


@dataclass
class _Batch:
    base_offset: int
    next_offset: int
    max_timestamp: int
    row: tuple[object, ...] | None  # the row to insert while not yet committed
    data: bytes


@dataclass
class PgColdRead:
    """A Fetch read from the database, prepared on the loop and run on a worker thread.
    ``zero_copy``: a large read is only located (a :class:`PgRegion`, read as it is sent)."""

    storage: PgEngine
    key: tuple[uuid.UUID, int]
    offset: int
    max_bytes: int
    upper_bound: int
    files: list[tuple[int, int]] = field(default_factory=list)  # ColdRead's shape: none here
    zero_copy: bool = False

    def run(self) -> bytes | PgRegion:
        queries = self.storage.queries
        if self.zero_copy:
            located = queries.locate_batches(self.key, self.offset, self.max_bytes, self.upper_bound, True)
            if sum(size for _, _, size in located) >= ZERO_COPY_MIN_BYTES:
                return PgRegion(queries, self.key, located)
        return queries.read_batches(self.key, self.offset, self.max_bytes, self.upper_bound, True)

    def release(self) -> None:
        pass


def open_partition(
    storage: PgEngine, topic_id: uuid.UUID, topic: str, index: int, config: LogConfig, now_ms: int,
    work: BlockingWork | None, *, new: bool,
) -> Partition:
    """A partition kept in the database: a ``Partition`` holding a :class:`PgEngineLog`."""
    producers = ProducerStateManager(Path(f"{topic}-{index}"))
    engine: EngineLog = PgEngineLog.open(storage, topic_id, topic, index, config, now_ms, work, producers, new=new)
    return Partition(engine, producers)


class PgEngineLog:
    """One partition's batches in PostgreSQL (an ``EngineLog``; ``Partition`` holds it)."""

    def __init__(
        self, storage: PgEngine, topic_id: uuid.UUID, topic: str, index: int, config: LogConfig, now_ms: int,
        work: BlockingWork | None, producers: ProducerStateManager,
    ) -> None:
        self.name = f"{topic}-{index}"
        self.config = config
        # The partition's producer table: replayed here at load; the stable offset reads it.
        self.producers = producers
        self.last_flush_ms = now_ms
        self._log_start_offset = 0
        self.storage = storage
        self.key = (topic_id, index)
        self.writer = uuid.uuid4()  # tells this log's own retried commit from another writer's
        self.work = work
        self.cache_bytes = CACHE_BYTES
        self._next_offset = 0
        self._committed_end = 0
        self._size_bytes = 0
        self._cache: list[_Batch] = []
        self._cache_bases: list[int] = []
        self._cache_size = 0
        self._pending: list[_Batch] = []  # appended, not in a commit yet
        self._retained: tuple[int, int] | None = None  # (new start, bytes freed) by a retention job
        self._closed = False
        # Producer id -> first offset of its transaction here, read committed from the database
        # while the marker is on its way (``learn_committed``).
        self._decided: dict[int, int] = {}
        # (marker offset, first offset of the transaction it ends) of markers not committed yet.
        self._unsynced_markers: list[tuple[int, int]] = []

    @classmethod
    def open(
        cls, storage: PgEngine, topic_id: uuid.UUID, topic: str, index: int, config: LogConfig, now_ms: int,
        work: BlockingWork | None, producers: ProducerStateManager, *, new: bool,
    ) -> PgEngineLog:
        """A partition of a topic just created starts empty; an existing one is loaded (start-up)."""
        partition = cls(storage, topic_id, topic, index, config, now_ms, work, producers)
        if not new:
            partition._load()
        return partition

    def _load(self) -> None:
        with self.storage.pool.connection() as conn, conn.transaction():
            row = conn.execute(_CLAIM, (*self.key, self.writer)).fetchone()
            assert row is not None
            self._log_start_offset, self._next_offset = row
            self._committed_end = self._next_offset
            size = conn.execute(
                "SELECT coalesce(sum(length(data)), 0) FROM kproto_batches WHERE topic_id = %s AND partition = %s",
                self.key,
            ).fetchone()
            self._size_bytes = int(size[0]) if size else 0
            cursor = conn.execute(
                "SELECT CASE WHEN attributes & %s <> 0 THEN data ELSE substring(data FROM 1 FOR %s) END"
                " FROM kproto_batches WHERE topic_id = %s AND partition = %s AND last_offset >= %s"
                " AND producer_id >= 0 ORDER BY base_offset",
                (CONTROL_MASK, HEADER_SIZE, *self.key, self._log_start_offset),
            )
            for (data,) in cursor:
                header = parse_header(data)  # a data batch's row gives its header only
                if header.is_control:
                    replay_marker(self.producers, bytes(data), 0, header)
                else:
                    self.producers.update((header,))
        self.producers.forget_aborted_before(self._log_start_offset)

    # -- the engine's primitives ------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def recovery_point(self) -> int:
        """Everything below it is committed in the database."""
        return self._committed_end

    @property
    def high_watermark(self) -> int:
        """Readers see what the database holds: records are visible once committed."""
        return self._committed_end

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, or the high watermark, over what the
        database holds: a transaction ends here once its marker is committed (not when appended:
        lost with this broker, the marker would leave a transaction seen that is then aborted),
        or once its coordinator's commit decision is read from the database (``learn_committed``)."""
        return min([self._committed_end, *(first for _, first in self._unsynced_markers),
                    *(first for _, _, first in self._undecided())])

    def undecided_transactions(self, offset: int) -> list[tuple[int, int, int]]:
        return [] if offset >= self._committed_end else list(self._undecided())

    def _undecided(self) -> Iterator[tuple[int, int, int]]:
        """(producer id, epoch, first offset) of the open transactions starting below the committed
        end whose commit is not known decided."""
        for entry in self.producers.ongoing():
            first = entry.txn_first_offset
            if first is not None and first < self._committed_end and self._decided.get(entry.producer_id) != first:
                yield entry.producer_id, entry.epoch, first

    def learn_committed(self, producer_id: int, epoch: int, first_offset: int) -> None:
        entry = self.producers.producers.get(producer_id)
        if entry is not None and entry.epoch == epoch and entry.txn_first_offset == first_offset:
            self._decided[producer_id] = first_offset

    def marker_appended(self, producer_id: int, txn_first_offset: int | None, offset: int) -> None:
        """Held back until committed, unless the commit is known decided (then it stays passed)."""
        decided = self._decided.pop(producer_id, None)
        if txn_first_offset is not None and decided != txn_first_offset:
            self._unsynced_markers.append((offset, txn_first_offset))

    @property
    def size_bytes(self) -> int:
        self._take_retained()
        return self._size_bytes

    @property
    def segment_base_offsets(self) -> list[int]:
        return [self._log_start_offset]  # one "segment": the partition's rows

    def check_open(self) -> None:
        if self._closed:
            raise ValueError(f"log {self.name} is closed")

    def write_batches(self, buf: bytes | bytearray, batches: Batches, max_timestamp: int, now_ms: int) -> None:
        topic_id, index = self.key
        for position, header in batches:
            data = bytes(buf[position : position + header.size])
            row = (
                topic_id, index, header.base_offset, header.last_offset, header.max_timestamp, header.producer_id,
                header.producer_epoch, header.base_sequence, header.attributes, data,
            )
            batch = _Batch(header.base_offset, header.next_offset, header.max_timestamp, row, data)
            self._pending.append(batch)
            self._cache.append(batch)
            self._cache_bases.append(header.base_offset)
            self._cache_size += len(data)
            self._size_bytes += len(data)
        self._next_offset = batches[-1][1].next_offset

    def read(
        self, offset: int, max_bytes: int, *, upper_bound: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        self.check_open()
        self._take_retained()
        start, end = self._log_start_offset, self._next_offset
        if offset < start or offset > end:
            raise KafkaError(Errors.OFFSET_OUT_OF_RANGE, f"offset {offset} is outside [{start}, {end}] of {self.name}")
        if offset == end or (upper_bound is not None and offset >= upper_bound):
            return ReadResult(b"", start, end)
        if self._cache and offset >= self._cache_bases[0]:
            i = bisect.bisect_right(self._cache_bases, offset) - 1
            rows = ((b.base_offset, b.data) for b in self._cache[i:])
            return ReadResult(take_batches(rows, max_bytes, upper_bound, min_one_batch), start, end)
        # Older than the cache: ListOffsets by timestamp comes here (Fetch reads it off the loop).
        self.storage.pool.check_available()
        return ReadResult(self.storage.queries.read_batches(self.key, offset, max_bytes, upper_bound, min_one_batch), start, end)

    def plan_cold_read(
        self, offset: int, max_bytes: int, isolation: IsolationLevel, *, zero_copy: bool = False
    ) -> PgColdRead | None:
        """Reads below the cache go to the database on a worker thread."""
        self.check_open()
        self._take_retained()
        upper_bound = visible_end(self, isolation)
        if not self._log_start_offset <= offset < upper_bound:
            return None
        if self._cache and offset >= self._cache_bases[0]:
            return None
        return PgColdRead(self.storage, self.key, offset, max_bytes, min(upper_bound, self._committed_end),
                          zero_copy=zero_copy)

    def read_region(
        self, offset: int, max_bytes: int, *, upper_bound: int, min_one_batch: bool
    ) -> HeldBatches | None:
        """A large read of the in-memory tail as the cached batches themselves (referenced, not
        joined into a copy per response); None below the cache, out of range, or small."""
        self.check_open()
        self._take_retained()
        if not (self._cache and self._cache_bases[0] <= offset < min(upper_bound, self._next_offset)):
            return None
        if offset < self._log_start_offset:
            return None
        taken: list[bytes] = []
        next_offsets: list[int] = []
        used = 0
        for batch in self._cache[bisect.bisect_right(self._cache_bases, offset) - 1:]:
            if batch.base_offset >= upper_bound:
                break
            if used + len(batch.data) > max_bytes and not (min_one_batch and not taken):
                break
            taken.append(batch.data)
            next_offsets.append(batch.next_offset)
            used += len(batch.data)
        if used < ZERO_COPY_MIN_BYTES:
            return None
        return HeldBatches(taken, next_offsets)

    def advance_log_start(self, offset: int) -> None:
        self._log_start_offset = offset
        self.producers.forget_aborted_before(offset)
        key = self.key

        def delete_below() -> None:
            self._retained = (offset, self.storage.queries.delete_below(key, offset))

        submit(self.work, delete_below)

    @property
    def log_start_offset(self) -> int:
        self._take_retained()
        return self._log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        """retention.ms / retention.bytes over batches (Kafka's rule per segment, a batch here):
        the oldest committed batches go while all of their timestamps are older than
        retention.ms, and while the partition stays at least retention.bytes without them. The
        query and the deletion run as a job; the new start is taken on the loop afterwards."""
        self.check_open()
        self._take_retained()
        retention_ms, retention_bytes = self.config.retention_ms, self.config.retention_bytes
        if retention_ms < 0 and retention_bytes < 0:
            return 0
        cutoff = now_ms - retention_ms if retention_ms >= 0 else None
        excess = self._size_bytes - retention_bytes if retention_bytes >= 0 else 0
        key, start, limit = self.key, self._log_start_offset, self._committed_end

        def retain() -> None:
            new_start, freed = self.storage.queries.retain(key, start, limit, cutoff, excess)
            if new_start > start:
                self._retained = (new_start, freed)

        submit(self.work, retain)
        return 0

    def _take_retained(self) -> None:
        """On the loop: apply what a retention job deleted (a plain tuple, set by the worker)."""
        retained = self._retained
        if retained is None:
            return
        self._retained = None
        new_start, freed = retained
        self._size_bytes = max(self._size_bytes - freed, 0)
        if new_start > self._log_start_offset:
            self._log_start_offset = new_start
            self.producers.forget_aborted_before(new_start)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """As Kafka's time index search (control batches count too), over committed batches."""
        self.check_open()
        self.storage.pool.check_available()
        return self.storage.queries.offset_lookup(self.key, self.log_start_offset, timestamp)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        self.check_open()
        self.storage.pool.check_available()
        return self.storage.queries.offset_lookup(self.key, self.log_start_offset, MAX_TIMESTAMP)

    def plan_offset_lookup(self, timestamp: int) -> Callable[[], tuple[int, int] | None] | None:
        self.check_open()
        storage, key, start = self.storage, self.key, self.log_start_offset
        return lambda: storage.queries.offset_lookup(key, start, timestamp)

    # -- durability -------------------------------------------------------------------------------

    def begin_flush(self) -> PgCommit:
        """The rows appended since the last commit, and the end move that fences other writers."""
        self.check_open()
        rows = [batch.row for batch in self._pending if batch.row is not None]
        pending, self._pending = self._pending, []
        before, after, start = self._committed_end, self._next_offset, self._log_start_offset
        name, key, writer = self.name, self.key, self.writer

        def stage(round_: RoundWrites, item: PgCommit) -> None:
            round_.batches.extend(rows)  # type: ignore[arg-type]
            round_.move_end(item, name, key, start, before, after, writer)

        return PgCommit(end_offset=after, items=pending, stage=stage)

    def finish_flush(self, pending: PgCommit, now_ms: int | None = None) -> Refused:
        """Apply a round's outcome; refused (another broker leads it now): closed, nothing more is
        written or served here, and the producer ids of the dropped markers are returned."""
        if self._closed:
            return None
        if pending.fenced:
            self._closed = True
            # Refused: this commit's rows, and those appended while it was on its way (a marker of a
            # transaction that ended meanwhile among them). Their coordinators are told.
            dropped = [batch.row for batch in [*pending.items, *self._pending] if batch.row is not None]
            self._pending = []
            return frozenset(int(row[5]) for row in dropped if int(row[8]) & CONTROL_MASK)  # type: ignore[call-overload]
        if not pending.synced:
            self._pending = pending.items + self._pending  # written again by the next round
            return None
        for batch in pending.items:
            batch.row = None
        self._committed_end = max(self._committed_end, pending.end_offset)
        if self._unsynced_markers:
            self._unsynced_markers = [m for m in self._unsynced_markers if m[0] >= self._committed_end]
        if now_ms is not None:
            self.last_flush_ms = now_ms
        self._trim_cache()
        return None

    def _trim_cache(self) -> None:
        drop = 0
        while (
            self._cache_size > self.cache_bytes and drop < len(self._cache) - 1 and self._cache[drop].row is None
        ):
            self._cache_size -= len(self._cache[drop].data)
            drop += 1
        if drop:
            del self._cache[:drop]
            del self._cache_bases[:drop]

    def flush(self, now_ms: int | None = None) -> Refused:
        """Commit now, on this thread (loading, closing, offline tools)."""
        pending = self.begin_flush()
        try:
            self.storage.commit([pending])
        finally:
            refused = self.finish_flush(pending, now_ms)
        return refused

    def close(self) -> Refused:
        if self._closed:
            return None
        refused = self.flush()
        self._closed = True
        return refused

    def delete(self) -> None:
        """DeleteTopics: the rows go with a job (the topic id is never reused)."""
        self._closed = True
        key = self.key
        submit(self.work, lambda: self.storage.queries.delete_partition(key))
