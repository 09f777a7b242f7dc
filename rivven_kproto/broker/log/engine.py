"""What a storage engine provides a partition: the primitives the two engines really differ in (#38).

The partition's rules (validation, offsets, the idempotent producer, transaction markers, a
consumer's view; ``partition.Partition``) are the same for every engine. A ``Partition`` holds its
engine as ``engine: EngineLog`` and reaches the stored batches only through these members, so an
engine is any plain class that has them (no base class to inherit): the native segment files
(``native_engine.NativeEngineLog``) and PostgreSQL rows
(``broker.storage.postgres.partition.PgEngineLog``) both do, checked by mypy where each
factory hands its engine to a ``Partition`` and by ``tests/broker/test_engine_protocol.py``.

What crosses the boundary besides bytes: the partition's ``ProducerStateManager`` (one object, given
to both: an engine rebuilds it at open and snapshots it, and PostgreSQL's stable offset reads the
open transactions), the ``LogConfig`` (the engine's, read by the partition), the log start offset
(kept by the engine, which persists it), and a refused write (``Refused``, returned by the flush
calls: the partition turns it into ``fenced`` and ``lost_markers``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from rivven_kproto.broker.durable.flush import FlushItem
from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.region import BatchRegion
from rivven_kproto.codec.enums import IsolationLevel
from rivven_kproto.codec.records.batch import BatchHeader

Batches = list[tuple[int, BatchHeader]]  # (position in the buffer, header), as validate_batches returns
# What a flush reports when another writer claimed the log (PostgreSQL): the producer ids whose
# transaction markers it dropped, for their coordinators to write again. None: not refused.
Refused = frozenset[int] | None


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

    name: str  # "<topic>-<partition>", for messages
    config: LogConfig  # replaced when the topic's configs change (the partition's ``config`` setter)

    @property
    def log_start_offset(self) -> int:
        """The first offset readers see (retention and DeleteRecords move it; the engine keeps it)."""

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
    def last_stable_offset(self) -> int:
        """The first offset of the earliest transaction a read_committed reader must wait for, or
        the high watermark (native: any open one; PostgreSQL: open and not known decided)."""

    @property
    def last_flush_ms(self) -> int:
        """When the last flush completed (or the log opened): ``flush.ms`` counts from it."""

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

    def marker_appended(self, producer_id: int, txn_first_offset: int | None, offset: int) -> None:
        """A transaction marker was written at ``offset``, ending the producer's transaction that
        began at ``txn_first_offset`` (None: none was open here)."""

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

    def finish_flush(self, pending: Any, now_ms: int | None = None) -> Refused:
        """Back on the loop: apply the outcome of the item ``begin_flush`` returned."""

    def flush(self, now_ms: int | None = None) -> Refused: ...

    def close(self) -> Refused:
        """Flush and close (a refused final flush is reported as by ``flush``)."""

    def delete(self) -> None: ...


def visible_end(log: EngineLog, isolation: IsolationLevel) -> int:
    """Where a consumer's view ends: the last stable offset for read_committed, else the HW."""
    return log.last_stable_offset if isolation == IsolationLevel.READ_COMMITTED else log.high_watermark
