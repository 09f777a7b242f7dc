"""What a storage engine provides a partition: the primitives the two engines really differ in (#38).

The partition's rules (validation, offsets, the idempotent producer, transaction markers, the last
stable offset, a consumer's view; ``base.PartitionLogBase``) are the same for every engine. They
reach the stored batches only through these members, so an engine is anything that has them: the
native segment files (``partition_log.PartitionLog``) and PostgreSQL rows
(``broker.storage.postgres.partition.PgPartitionLog``) both do, checked by
``tests/broker/test_engine_protocol.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from rivven_kproto.broker.durable.flush import FlushItem
from rivven_kproto.broker.log.region import BatchRegion
from rivven_kproto.codec.enums import IsolationLevel
from rivven_kproto.codec.records.batch import BatchHeader

Batches = list[tuple[int, BatchHeader]]  # (position in the buffer, header), as validate_batches returns


class ColdReadPlan(Protocol):
    """A read prepared on the loop and run once on a worker thread (``span.ColdRead``, or a query)."""

    offset: int

    def run(self) -> bytes | BatchRegion: ...

    def release(self) -> None: ...


@dataclass(frozen=True)
class ReadResult:
    data: bytes
    log_start_offset: int
    log_end_offset: int


@runtime_checkable
class EngineLog(Protocol):
    """Store, read, retain and make durable one partition's batches."""

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign."""

    @property
    def recovery_point(self) -> int:
        """Offsets below it are durable (the engine's last completed flush)."""

    @property
    def high_watermark(self) -> int:
        """Offsets below it are committed (PostgreSQL: in the database; native: all appended)."""

    @property
    def closed(self) -> bool: ...

    @property
    def size_bytes(self) -> int: ...

    @property
    def segment_base_offsets(self) -> list[int]: ...

    def check_open(self) -> None:
        """Raise ValueError once the log is closed."""

    def write_batches(self, buf: bytes | bytearray, batches: Batches, max_timestamp: int, now_ms: int) -> None:
        """Store validated, stamped batches at the log end (raise KafkaError to refuse)."""

    def read(
        self, offset: int, max_bytes: int, *, upper_bound: int | None = None, min_one_batch: bool = True
    ) -> ReadResult: ...

    def read_region(
        self, offset: int, max_bytes: int, *, upper_bound: int, min_one_batch: bool
    ) -> BatchRegion | None:
        """What ``read`` would return as a region the server may ``sendfile`` (None: copy it)."""

    def plan_cold_read(
        self, offset: int, max_bytes: int, isolation: IsolationLevel, *, zero_copy: bool = False
    ) -> ColdReadPlan | None:
        """A Fetch read worth a worker thread, or None to read inline."""

    def advance_log_start(self, offset: int) -> None:
        """Hide (and eventually delete) the offsets below ``offset``."""

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...

    def max_timestamp_offset(self) -> tuple[int, int] | None: ...

    def plan_offset_lookup(self, timestamp: int) -> Callable[[], tuple[int, int] | None] | None:
        """ListOffsets by timestamp as a worker-thread function, or None to look up inline."""

    def undecided_transactions(self, offset: int) -> list[tuple[int, int, int]]:
        """Open transactions a read at ``offset`` waits for whose decision may be made elsewhere."""

    def learn_committed(self, producer_id: int, epoch: int, first_offset: int) -> None:
        """An open transaction ``undecided_transactions`` named is decided committed."""

    def apply_retention(self, now_ms: int) -> int: ...

    def begin_flush(self) -> FlushItem:
        """Capture what the flusher must make durable."""

    def finish_flush(self, pending: Any, now_ms: int | None = None) -> None:
        """Back on the loop: apply the outcome of the item ``begin_flush`` returned."""

    def flush(self, now_ms: int | None = None) -> None: ...

    def close(self) -> None: ...

    def delete(self) -> None: ...
