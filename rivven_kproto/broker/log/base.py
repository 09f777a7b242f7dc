"""The rules of one topic-partition's log that do not depend on where its batches are stored.

Validation, offset assignment, the idempotent producer's checks, transaction markers and the last
stable offset, and a consumer's view of the log are the same whichever engine keeps the bytes: the
native segment files (``partition_log.PartitionLog``) or PostgreSQL rows
(``broker.storage.postgres.partition``). An engine implements the storage primitives at the end:
the members of ``engine.EngineLog``, the typed protocol of what the engines differ in.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rivven_kproto.broker.durable.flush import FlushItem
from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.engine import Batches, ColdReadPlan, ReadResult  # noqa: F401 (re-exported)
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
from rivven_kproto.codec.records.control import ControlType, build_control_batch, parse_control_record
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


class PartitionLogBase(ABC):
    """Append, mark and read one partition; the engine stores and reads the bytes (its abstract
    methods: a subclass that lacks one cannot be made)."""

    def __init__(self, name: str, config: LogConfig, producers: ProducerStateManager, now_ms: int) -> None:
        self.name = name  # "<topic>-<partition>", for messages
        self.config = config
        self.producers = producers
        self._log_start_offset = 0
        self.last_flush_ms = now_ms
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

    # -- what an engine provides -----------------------------------------------------------------

    @property
    @abstractmethod
    def log_end_offset(self) -> int:
        """The next offset to assign."""

    @abstractmethod
    def check_open(self) -> None:
        ...

    @abstractmethod
    def write_batches(self, buf: bytes | bytearray, batches: Batches, max_timestamp: int, now_ms: int) -> None:
        """Store validated, stamped batches at the log end (raise KafkaError to refuse)."""

    @abstractmethod
    def read(
        self, offset: int, max_bytes: int, *, upper_bound: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        ...

    @abstractmethod
    def advance_log_start(self, offset: int) -> None:
        """Hide (and eventually delete) the offsets below ``offset``."""

    @property
    @abstractmethod
    def closed(self) -> bool:
        ...

    @property
    @abstractmethod
    def size_bytes(self) -> int:
        ...

    @property
    @abstractmethod
    def segment_base_offsets(self) -> list[int]:
        ...

    @abstractmethod
    def plan_cold_read(
        self, offset: int, max_bytes: int, isolation: IsolationLevel, *, zero_copy: bool = False
    ) -> ColdReadPlan | None:
        """A Fetch read worth a worker thread, or None to read inline (``zero_copy``: the plan
        may return a :class:`BatchRegion`, see :meth:`read_region`)."""

    def read_region(
        self, offset: int, max_bytes: int, *, upper_bound: int, min_one_batch: bool
    ) -> BatchRegion | None:
        """What :meth:`read` would return, as a region of files the server may ``sendfile``;
        None when the engine has no files or the read is too small to gain from it."""
        return None

    @abstractmethod
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        ...

    @abstractmethod
    def max_timestamp_offset(self) -> tuple[int, int] | None:
        ...

    def plan_offset_lookup(self, timestamp: int) -> Callable[[], tuple[int, int] | None] | None:
        """ListOffsets by ``timestamp`` (or -3, the largest) as a function for a worker thread,
        or None when the lookup is cheap enough to run inline (the native log's indexes)."""
        return None

    @abstractmethod
    def apply_retention(self, now_ms: int) -> int:
        ...

    @abstractmethod
    def begin_flush(self) -> FlushItem:
        """Capture what the flusher must make durable (``PendingFlush`` or a database commit)."""

    @abstractmethod
    def finish_flush(self, pending: Any, now_ms: int | None = None) -> None:
        """Back on the loop: apply the outcome of the item this log's ``begin_flush`` returned."""

    @abstractmethod
    def flush(self, now_ms: int | None = None) -> None:
        ...

    @abstractmethod
    def close(self) -> None:
        ...

    @abstractmethod
    def delete(self) -> None:
        ...

    # -- shared rules ----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def unflushed_messages(self) -> int:
        """Offsets appended since the last flush (Kafka's ``flush.messages`` counter)."""
        return self.log_end_offset - self.recovery_point

    @property
    @abstractmethod
    def recovery_point(self) -> int:
        """Offsets below it are durable (the engine's last completed flush)."""

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
        self.check_open()
        batches = validate_batches(data, self.config, from_client=from_client)
        max_timestamps = None
        if from_client:
            if record_check is None or record_check.data is not data or record_check.config is not self.config:
                record_check = validate_records(data, batches, self.config, f" {self.name}")
            max_timestamps = record_check.max_timestamps
        log_append_time = now_ms if self.config.log_append_time else -1
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
                self.log_end_offset,
                log_append_time_ms=now_ms if self.config.log_append_time else None,
                leader_epoch=LEADER_EPOCH,
                max_timestamps=max_timestamps,
            )
            buf = stamped
        else:
            check_offsets(batches, self.log_end_offset)
        headers = tuple(header for _, header in batches)
        if headers[-1].last_offset - headers[0].base_offset > MAX_RELATIVE_OFFSET:
            raise KafkaError(Errors.INVALID_RECORD, "the batches span more offsets than a segment can index")
        max_timestamp, offset_of_max = -1, -1
        for header in headers:
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.base_offset
        self.write_batches(buf, batches, max_timestamp, now_ms)
        self.producers.update(headers)
        if from_client:
            self.appended_messages += headers[-1].last_offset - headers[0].base_offset + 1
            self.appended_bytes += len(buf)
        return AppendInfo(
            base_offset=headers[0].base_offset,
            last_offset=headers[-1].last_offset,
            log_append_time=log_append_time,
            log_start_offset=self._log_start_offset,
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
            log_start_offset=self._log_start_offset,
            max_timestamp=original.timestamp,
            offset_of_max_timestamp=original.first_offset,
            batches=(header,),
            size=0,
            duplicate=True,
        )

    def _replay(self, data: bytes, after: int) -> int:
        """Rebuild producer state from stored batches (headers; control records decoded) that end
        after ``after``; returns the offset after the last batch seen."""
        last = after
        for position, header in iter_headers(data):
            last = header.next_offset
            if header.next_offset <= after:
                continue
            if header.is_control:
                self._replay_marker(data, position, header)
            else:
                self.producers.update((header,))
        return last

    def _replay_marker(self, data: bytes, position: int, header: BatchHeader) -> None:
        try:
            record = decode_batch(data, position, verify_crc=False).records[0]
            kind, _ = parse_control_record(record)
        except (ValueError, IndexError):
            return  # a control record of a kind that is not a transaction marker
        self.producers.complete_txn(header.producer_id, header.producer_epoch, header.base_offset, kind == ControlType.COMMIT)

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
        info = self.append(marker, now_ms, from_client=False)
        self.markers_written += 1
        self.producers.complete_txn(producer_id, producer_epoch, info.base_offset, commit)
        return info.base_offset

    def undecided_transactions(self, offset: int) -> list[tuple[int, int, int]]:
        """Open transactions holding back what a read_committed read at ``offset`` sees that a
        coordinator elsewhere may have decided to commit: (producer id, epoch, first offset).
        None here: this process writes every marker of its logs (PostgreSQL's log has some)."""
        return []

    def learn_committed(self, producer_id: int, epoch: int, first_offset: int) -> None:
        """The open transaction (as ``undecided_transactions`` named it) is decided committed."""
        return None  # an engine whose markers are all written locally never waits for a decision

    @property
    def high_watermark(self) -> int:
        """One node, nothing to replicate: everything appended is committed."""
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, or the high watermark."""
        return self.producers.last_stable_offset(self.high_watermark)

    def visible_end(self, isolation: IsolationLevel) -> int:
        """Where a consumer's view ends: the last stable offset for read_committed, else the HW."""
        return self.last_stable_offset if isolation == IsolationLevel.READ_COMMITTED else self.high_watermark

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
        high_watermark, last_stable = self.high_watermark, self.last_stable_offset
        data: bytes | BatchRegion = b""
        try:
            if prefetched is not None and offset >= self._log_start_offset:
                if isinstance(prefetched, BatchRegion):
                    data = prefetched if prefetched.cut(max_bytes, min_one_batch) else b""
                else:
                    data = whole_batches(prefetched, max_bytes, min_one_batch)
                log_start = self._log_start_offset
            else:
                region = None
                upper_bound = self.visible_end(isolation)
                if zero_copy:
                    region = self.read_region(offset, max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch)
                if region is not None:
                    data, log_start = region, self._log_start_offset
                else:
                    result = self.read(offset, max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch)
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
        self.check_open()
        limit = self.log_end_offset if high_watermark is None else high_watermark
        if before_offset == -1:
            before_offset = limit
        if before_offset < 0 or before_offset > limit:
            raise KafkaError(
                Errors.OFFSET_OUT_OF_RANGE,
                f"cannot delete records before {before_offset}: the limit is {limit}",
            )
        if before_offset > self._log_start_offset:
            self.advance_log_start(before_offset)
        return self._log_start_offset
