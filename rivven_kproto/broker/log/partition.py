"""One topic-partition: the rules of its log that do not depend on where its batches are stored.

Validation, offset assignment, the idempotent producer's checks, transaction markers, and a
consumer's view of the log are the same whichever engine keeps the bytes, so there is one
``Partition`` class and it holds its engine (``engine.EngineLog``: the native segment files,
``native_engine.NativeEngineLog``, or PostgreSQL rows, ``broker.storage.postgres.partition``)
instead of being subclassed by it. Each engine module has an ``open_partition`` factory that builds
the engine and the partition around it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rivven_kproto.broker.durable.flush import FlushItem
from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.engine import (  # noqa: F401 (Batches re-exported)
    Batches,
    ColdReadPlan,
    EngineLog,
    ReadResult,
    Refused,
    visible_end,
)
from rivven_kproto.broker.log.producer_state import AbortedTxn, BatchMeta, ProducerStateManager
from rivven_kproto.broker.log.region import BatchRegion
from rivven_kproto.broker.log.segment import MAX_RELATIVE_OFFSET
from rivven_kproto.broker.log.span import whole_batches
from rivven_kproto.broker.log.validation import (
    RecordCheck,
    check_offsets,
    stamp_batches,
    validate_batches,
    validate_records,
)
from rivven_kproto.codec.enums import IsolationLevel
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.records.batch import BatchHeader, iter_headers
from rivven_kproto.codec.records.control import ControlType, build_control_batch
from rivven_kproto.codec.records.records import decode_batch

LEADER_EPOCH = 0  # one leader epoch: a partition's leader never changes
NO_LEADER_EPOCH = -1


@dataclass(frozen=True)
class Fetched:
    """One partition's part of a Fetch: batches visible at the isolation level, and the marks."""

    data: bytes | BatchRegion  # a region only when the caller asked for one (``zero_copy``)
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[AbortedTxn] | None  # read_committed: transactions overlapping the data; else None


def check_leader_epoch(current_leader_epoch: int) -> None:
    """Kafka's fencing check on a client's idea of the leader epoch (-1: the client has none)."""
    if current_leader_epoch == NO_LEADER_EPOCH:
        return
    if current_leader_epoch < LEADER_EPOCH:
        raise KafkaError(Errors.FENCED_LEADER_EPOCH, f"leader epoch {current_leader_epoch} is older than ours")
    if current_leader_epoch > LEADER_EPOCH:
        raise KafkaError(Errors.UNKNOWN_LEADER_EPOCH, f"leader epoch {current_leader_epoch} is newer than ours")


@dataclass(frozen=True)
class AppendInfo:
    """What a produce response (and the producer-state tracker) needs to know about an append."""

    base_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime topics
    log_start_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    batches: tuple[BatchHeader, ...]  # headers as written (offsets, timestamps, producer fields)
    size: int
    duplicate: bool = False  # an idempotent retry: nothing written, offsets are the original ones


def exact_record(data: bytes, log_start: int, wanted: Callable[[int], bool]) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of the first batch in ``data`` at or after
    ``log_start`` whose timestamp ``wanted`` accepts: ListOffsets' record-exact answer (only it
    decodes a batch; produce and fetch never do)."""
    if not data:
        return None
    try:
        batch = decode_batch(data, 0, verify_crc=False)
    except ValueError:
        return None
    for offset, ts, _record in batch.iter_absolute():
        if offset >= log_start and wanted(ts):
            return offset, ts
    return None


class Partition:
    """Append, mark and read one partition by Kafka's rules; ``engine`` stores and reads the bytes.

    One class for every engine: an engine is held, never subclassed (#38). ``producers`` is shared
    with the engine, which rebuilds it when it opens the log and snapshots it."""

    def __init__(self, engine: EngineLog, producers: ProducerStateManager) -> None:
        self.engine = engine
        self.name = engine.name  # "<topic>-<partition>", for messages
        self.producers = producers
        # Since this process opened the log (for the metrics): client records and bytes appended
        # (duplicates not counted), and transaction markers written.
        self.appended_messages = 0
        self.appended_bytes = 0
        self.markers_written = 0
        # Another broker claimed the partition in a shared store: this log writes and serves no more.
        self.fenced = False
        # Producer ids whose transaction markers were appended here but never made durable because
        # the log was fenced first: their coordinators must write them again, at the new leader.
        self.lost_markers: frozenset[int] = frozenset()

    @property
    def config(self) -> LogConfig:
        return self.engine.config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self.engine.config = config  # the engine's retention and segment sizes follow the topic's

    # -- the engine's state, as the broker and server read it -------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self.engine.log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign."""
        return self.engine.log_end_offset

    @property
    def recovery_point(self) -> int:
        """Offsets below it are durable (the engine's last completed flush)."""
        return self.engine.recovery_point

    @property
    def unflushed_messages(self) -> int:
        """Offsets appended since the last flush (Kafka's ``flush.messages`` counter)."""
        engine = self.engine
        return engine.log_end_offset - engine.recovery_point

    @property
    def last_flush_ms(self) -> int:
        return self.engine.last_flush_ms

    @property
    def closed(self) -> bool:
        return self.engine.closed

    @property
    def size_bytes(self) -> int:
        return self.engine.size_bytes

    @property
    def segment_base_offsets(self) -> list[int]:
        return self.engine.segment_base_offsets

    @property
    def high_watermark(self) -> int:
        """Committed offsets end here (one native node, nothing to replicate: all appended)."""
        return self.engine.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, or the high watermark."""
        return self.engine.last_stable_offset

    def visible_end(self, isolation: IsolationLevel) -> int:
        """Where a consumer's view ends: the last stable offset for read_committed, else the HW."""
        return visible_end(self.engine, isolation)

    def check_open(self) -> None:
        self.engine.check_open()

    # -- reads, lookups and upkeep the engine does alone ------------------------------------------

    def read(
        self, offset: int, max_bytes: int, *, upper_bound: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        return self.engine.read(offset, max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch)

    def read_region(
        self, offset: int, max_bytes: int, *, upper_bound: int, min_one_batch: bool
    ) -> BatchRegion | None:
        """What :meth:`read` would return, as a region the server may ``sendfile`` (None: copy)."""
        return self.engine.read_region(offset, max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch)

    def plan_cold_read(
        self, offset: int, max_bytes: int, isolation: IsolationLevel, *, zero_copy: bool = False
    ) -> ColdReadPlan | None:
        """A Fetch read worth a worker thread, or None to read inline (``zero_copy``: the plan
        may return a :class:`BatchRegion`, see :meth:`read_region`)."""
        return self.engine.plan_cold_read(offset, max_bytes, isolation, zero_copy=zero_copy)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        return self.engine.offset_for_timestamp(timestamp)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        return self.engine.max_timestamp_offset()

    def plan_offset_lookup(self, timestamp: int) -> Callable[[], tuple[int, int] | None] | None:
        """ListOffsets by ``timestamp`` (or -3, the largest) as a function for a worker thread,
        or None when the lookup is cheap enough to run inline (the native log's indexes)."""
        return self.engine.plan_offset_lookup(timestamp)

    def apply_retention(self, now_ms: int) -> int:
        return self.engine.apply_retention(now_ms)

    def begin_flush(self) -> FlushItem:
        """Capture what the flusher must make durable (``PendingFlush`` or a database commit)."""
        return self.engine.begin_flush()

    def finish_flush(self, pending: Any, now_ms: int | None = None) -> None:
        """Back on the loop: apply the outcome of the item this log's ``begin_flush`` returned."""
        self._refused(self.engine.finish_flush(pending, now_ms))

    def flush(self, now_ms: int | None = None) -> None:
        self._refused(self.engine.flush(now_ms))

    def close(self) -> None:
        self._refused(self.engine.close())

    def delete(self) -> None:
        self.engine.delete()

    def _refused(self, refused: Refused) -> None:
        """The engine's writes were refused (another broker claimed the log): fenced from now on."""
        if refused is not None:
            self.fenced = True
            self.lost_markers = refused

    # -- the rules -------------------------------------------------------------------------------

    def append(
        self,
        data: bytes | bytearray,
        now_ms: int,
        *,
        assign_offsets: bool = True,
        from_client: bool = True,
        record_check: RecordCheck | None = None,
    ) -> AppendInfo:
        """Validate ``data`` (RecordBatch v2 bytes), give it offsets and write it with one write.

        Nothing is written unless every batch passes. ``assign_offsets=False`` keeps the batches'
        own offsets (they must follow the log end); ``from_client=False`` is for the broker's own
        writers (control batches allowed, records not walked). Client batches have every record
        walked, here or earlier off the event loop (``record_check`` for exactly this ``data``).
        """
        engine = self.engine
        engine.check_open()
        config = engine.config
        batches = validate_batches(data, config, from_client=from_client)
        max_timestamps = None
        if from_client:
            if record_check is None or record_check.data is not data or record_check.config is not config:
                record_check = validate_records(data, batches, config, f" {self.name}")
            max_timestamps = record_check.max_timestamps
        log_append_time = now_ms if config.log_append_time else -1
        if from_client:
            for _, header in batches:
                duplicate = self.producers.check(header)
                if duplicate is not None:
                    return self._duplicate_info(duplicate, header)
        buf: bytes | bytearray = data
        if assign_offsets:
            stamped = bytearray(data)
            batches = stamp_batches(
                stamped,
                batches,
                engine.log_end_offset,
                log_append_time_ms=now_ms if config.log_append_time else None,
                leader_epoch=LEADER_EPOCH,
                max_timestamps=max_timestamps,
            )
            buf = stamped
        else:
            check_offsets(batches, engine.log_end_offset)
        headers = tuple(header for _, header in batches)
        if headers[-1].last_offset - headers[0].base_offset > MAX_RELATIVE_OFFSET:
            raise KafkaError(Errors.INVALID_RECORD, "the batches span more offsets than a segment can index")
        max_timestamp, offset_of_max = -1, -1
        for header in headers:
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.base_offset
        engine.write_batches(buf, batches, max_timestamp, now_ms)
        self.producers.update(headers)
        if from_client:
            self.appended_messages += headers[-1].last_offset - headers[0].base_offset + 1
            self.appended_bytes += len(buf)
        return AppendInfo(
            base_offset=headers[0].base_offset,
            last_offset=headers[-1].last_offset,
            log_append_time=log_append_time,
            log_start_offset=engine.log_start_offset,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max,
            batches=headers,
            size=len(buf),
        )

    def _duplicate_info(self, original: BatchMeta, header: BatchHeader) -> AppendInfo:
        """Kafka answers a retried batch with the offsets it was first written at."""
        return AppendInfo(
            base_offset=original.first_offset,
            last_offset=original.last_offset,
            log_append_time=-1,
            log_start_offset=self.engine.log_start_offset,
            max_timestamp=original.timestamp,
            offset_of_max_timestamp=original.first_offset,
            batches=(header,),
            size=0,
            duplicate=True,
        )

    # -- transactions ----------------------------------------------------------------------------

    def append_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, now_ms: int
    ) -> int:
        """Write a COMMIT/ABORT control batch ending the producer's transaction here; its offset."""
        known = self.producers.producers.get(producer_id)
        if known is not None and producer_epoch < known.epoch:
            raise KafkaError(
                Errors.INVALID_PRODUCER_EPOCH,
                f"marker epoch {producer_epoch} is older than producer {producer_id}'s epoch {known.epoch}",
            )
        marker = build_control_batch(
            ControlType.COMMIT if commit else ControlType.ABORT,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timestamp=now_ms,
        )
        first = known.txn_first_offset if known is not None else None
        info = self.append(marker, now_ms, from_client=False)
        self.markers_written += 1
        self.producers.complete_txn(producer_id, producer_epoch, info.base_offset, commit)
        self.engine.marker_appended(producer_id, first, info.base_offset)
        return info.base_offset

    def undecided_transactions(self, offset: int) -> list[tuple[int, int, int]]:
        """Open transactions holding back what a read_committed read at ``offset`` sees that a
        coordinator elsewhere may have decided to commit: (producer id, epoch, first offset).
        None on the native log: this process writes every marker of its logs."""
        return self.engine.undecided_transactions(offset)

    def learn_committed(self, producer_id: int, epoch: int, first_offset: int) -> None:
        """The open transaction (as ``undecided_transactions`` named it) is decided committed."""
        self.engine.learn_committed(producer_id, epoch, first_offset)

    def fetch(
        self, offset: int, max_bytes: int, isolation: IsolationLevel, *, min_one_batch: bool,
        prefetched: bytes | BatchRegion | None = None, zero_copy: bool = False,
    ) -> Fetched:
        """Kafka's read for a consumer: whole batches below the visible end, and for
        read_committed the aborted transactions overlapping them (clients drop those records).

        ``prefetched``: what a ``ColdRead`` of this offset returned (read with at least this
        budget, below an earlier, so lower or equal, visible end); cut to ``max_bytes`` here.
        ``zero_copy``: the data may be a :class:`BatchRegion` (the caller sends it unchanged and
        releases it); the same batches as the bytes, either way."""
        engine = self.engine
        high_watermark, last_stable = engine.high_watermark, engine.last_stable_offset
        data: bytes | BatchRegion = b""
        try:
            if prefetched is not None and offset >= engine.log_start_offset:
                if isinstance(prefetched, BatchRegion):
                    data = prefetched if prefetched.cut(max_bytes, min_one_batch) else b""
                else:
                    data = whole_batches(prefetched, max_bytes, min_one_batch)
                log_start = engine.log_start_offset
            else:
                region = None
                upper_bound = last_stable if isolation == IsolationLevel.READ_COMMITTED else high_watermark
                if zero_copy:
                    region = engine.read_region(offset, max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch)
                if region is not None:
                    data, log_start = region, engine.log_start_offset
                else:
                    result = engine.read(offset, max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch)
                    data, log_start = result.data, result.log_start_offset
        finally:
            if isinstance(prefetched, BatchRegion) and data is not prefetched:
                prefetched.release()
        aborted = None
        if isolation == IsolationLevel.READ_COMMITTED:
            end = offset
            if isinstance(data, BatchRegion):
                end = data.end_offset
            else:
                for _, header in iter_headers(data):
                    end = header.next_offset
            aborted = self.producers.aborted_between(offset, end)
        return Fetched(data, high_watermark, last_stable, log_start, aborted)

    def delete_records(self, before_offset: int, *, high_watermark: int | None = None) -> int:
        """DeleteRecords: hide offsets below ``before_offset`` (-1: the high watermark); returns
        the new log start offset (the response's low watermark)."""
        engine = self.engine
        engine.check_open()
        limit = engine.log_end_offset if high_watermark is None else high_watermark
        if before_offset == -1:
            before_offset = limit
        if before_offset < 0 or before_offset > limit:
            raise KafkaError(
                Errors.OFFSET_OUT_OF_RANGE,
                f"cannot delete records before {before_offset}: the limit is {limit}",
            )
        if before_offset > engine.log_start_offset:
            engine.advance_log_start(before_offset)
        return engine.log_start_offset
