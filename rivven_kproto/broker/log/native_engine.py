"""The native log of one topic-partition: a directory of segments plus three small state files.

Directory layout::

    <20-digit base>.log / .index / .timeindex   one segment each, see ``segment.py``
    recovery-point      offset checkpoint: every offset below it was fsynced (see ``durable/files.py``)
    log-start-offset    offset checkpoint: first offset visible to readers (retention, DeleteRecords)
    clean-shutdown      empty marker, present only while the log is closed after a clean close()

Opening removes the marker (durably) before anything else. Without it, the segments from the one
holding the recovery point onwards are recovered: every batch is verified and the first bad one cut
off together with all later segments. With it, segments are loaded from their indexes and only the
tail after the last index entry is scanned. Appends are one write per call into the page cache; the
log never fsyncs on its own: the server's flusher calls ``begin_flush``/``finish_flush`` around an
fsync on a worker thread. Other file work a state change causes (the producer snapshot at a roll,
checkpoints and segment deletions of retention and DeleteRecords, a deleted partition's files) goes
to ``work`` (see ``durable/work.py``), which the server runs in order off the event loop.

``NativeEngineLog`` is the engine (an ``engine.EngineLog``); the rules are the ``Partition`` holding
it, which ``open_partition`` builds.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from rivven_kproto.broker.durable import files as checkpoint
from rivven_kproto.broker.durable.flush import PendingFlush
from rivven_kproto.broker.durable.work import BlockingWork, submit
from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.descriptor_cache import DescriptorCache, shared_cache
from rivven_kproto.broker.log.directory import (
    DELETED_SUFFIX,
    dropped_when_deleted,
    is_segment_name,
    load_segments,
    make_directory,
    remove_strays,
)
from rivven_kproto.broker.log.engine import Batches, EngineLog, ReadResult, visible_end
from rivven_kproto.broker.log.partition import (  # noqa: F401 (re-exported: the log's public types)
    LEADER_EPOCH,
    NO_LEADER_EPOCH,
    AppendInfo,
    Fetched,
    Partition,
    check_leader_epoch,
    exact_record,
)
from rivven_kproto.broker.log.producer_state import (
    ProducerStateManager,
    replay,
    store_snapshot,
)
from rivven_kproto.broker.log.region import ZERO_COPY_MIN_BYTES, FileRegion, locate_span
from rivven_kproto.broker.log.segment import LOG_SUFFIX, Segment
from rivven_kproto.broker.log.span import ColdRead, read_span
from rivven_kproto.codec.enums import IsolationLevel
from rivven_kproto.codec.errors import Errors, KafkaError

logger = logging.getLogger(__name__)

MARKER_FILE = "clean-shutdown"
RECOVERY_POINT_FILE = "recovery-point"
LOG_START_FILE = "log-start-offset"
REBUILD_CHUNK_BYTES = 8 * 1024 * 1024
# A Fetch read of the active segment that may copy this much is done off the event loop too.
LARGE_READ_BYTES = 256 * 1024


def open_partition(
    directory: Path, config: LogConfig, now_ms: int, work: BlockingWork | None = None,
    files: DescriptorCache | None = None,
) -> Partition:
    """The partition in ``directory``: a ``Partition`` holding a :meth:`NativeEngineLog.open`."""
    producers = ProducerStateManager(directory)
    engine: EngineLog = NativeEngineLog.open(directory, config, now_ms, producers, work, files)
    return Partition(engine, producers)


class NativeEngineLog:
    """Store, read, search, retain and recover the batches of one partition directory."""

    def __init__(
        self, directory: Path, config: LogConfig, segments: list[Segment], now_ms: int,
        producers: ProducerStateManager, files: DescriptorCache | None = None,
    ) -> None:
        self.name = directory.name  # "<topic>-<partition>", for messages
        self.config = config
        # The partition's producer table: rebuilt at open and truncation, snapshotted at rolls.
        self.producers = producers
        self.last_flush_ms = now_ms
        self.directory = directory
        self.files = files if files is not None else shared_cache()
        self._segments = segments
        self._bases = [segment.base_offset for segment in segments]
        self.log_start_offset = segments[0].base_offset  # persisted in LOG_START_FILE
        self._recovery_point = 0
        self._dir_dirty = False
        self._truncations = 0
        self._checkpoint_missing = False
        self._parent_unsynced = False
        self._closed = False
        self._deleted = False  # DeleteTopics: the jobs still queued for this partition are dropped
        self.work: BlockingWork | None = None

    # -- opening ---------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, directory: Path, config: LogConfig, now_ms: int, producers: ProducerStateManager,
        work: BlockingWork | None = None, files: DescriptorCache | None = None,
    ) -> NativeEngineLog:
        """Open (creating if needed) the log in ``directory``, recovering it after a crash.

        Opening does its file work at once; later file work goes to ``work`` when given. Segment
        files are opened through ``files`` (the process's shared cache by default)."""
        files = files if files is not None else shared_cache()
        # Served by a broker (``work``): the new directory's entry is fsynced by the first flush,
        # which every acknowledged write waits for as its policy says, so CreateTopics with many
        # partitions costs no fsync per partition on the event loop.
        parent_unsynced = make_directory(directory, sync_parent=work is None)
        if parent_unsynced:
            return cls._new(directory, config, now_ms, producers, work, files)
        remove_strays(directory)
        clean = checkpoint.remove_marker(directory / MARKER_FILE)
        recovery_point = checkpoint.read_offset(directory / RECOVERY_POINT_FILE) or 0
        log_start = checkpoint.read_offset(directory / LOG_START_FILE)
        bases = sorted(int(path.stem) for path in directory.glob("*" + LOG_SUFFIX) if is_segment_name(path))
        segments = [Segment(directory, base, config.index_interval_bytes, now_ms, files) for base in bases]
        created = not segments
        if created:
            segments = [Segment(directory, log_start or 0, config.index_interval_bytes, now_ms, files)]
        # A new log has nothing to recover (and nothing to flush yet).
        first_dirty = len(segments) if clean or created else max(bisect.bisect_right(bases, recovery_point) - 1, 0)
        segments, recovered = load_segments(segments, first_dirty, recovery_point)
        for sealed in segments[:-1]:
            sealed.write_indexes()  # rebuilt ones: later flushes only cover the active segment
        log = cls(directory, config, segments, now_ms, producers, files)
        log._dir_dirty = created
        log._recovery_point = min(recovery_point, log.log_end_offset)
        # Without a checkpoint the start is the first segment's base, so nothing needs writing.
        start = min(max(log_start or 0, segments[0].base_offset), log.log_end_offset)
        log._set_log_start_offset(start, persist=log_start is not None and start != log_start)
        if recovered:
            log.flush(now_ms)
        log._rebuild_producer_state()
        log._checkpoint_missing = not (directory / RECOVERY_POINT_FILE).exists()
        log._parent_unsynced = parent_unsynced and work is not None
        log.work = work
        logger.debug(
            "opened %s (%s): offsets [%d, %d), %d segments",
            directory,
            "clean" if clean else "recovered",
            log.log_start_offset,
            log.log_end_offset,
            len(segments),
        )
        return log

    @classmethod
    def _new(
        cls, directory: Path, config: LogConfig, now_ms: int, producers: ProducerStateManager,
        work: BlockingWork | None, files: DescriptorCache,
    ) -> NativeEngineLog:
        """A log in a directory just created: nothing to look for, load or recover (CreateTopics of
        10,000 partitions opens 10,000 of these on the event loop)."""
        segments = [Segment(directory, 0, config.index_interval_bytes, now_ms, files)]
        log = cls(directory, config, segments, now_ms, producers, files)
        log._dir_dirty = True
        log._checkpoint_missing = True
        log._parent_unsynced = work is not None
        log.work = work
        return log

    # -- properties ------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign."""
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        """One node, nothing to replicate: everything appended is committed."""
        return self._segments[-1].next_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, or the high watermark."""
        return self.producers.last_stable_offset(self._segments[-1].next_offset)

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def _active(self) -> Segment:
        return self._segments[-1]

    def check_open(self) -> None:
        if self._closed:
            raise ValueError(f"log {self.directory} is closed")

    # -- appending -------------------------------------------------------------------------------

    def write_batches(self, buf: bytes | bytearray, batches: Batches, max_timestamp: int, now_ms: int) -> None:
        first, last = batches[0][1], batches[-1][1]
        self._maybe_roll(len(buf), first.base_offset, last.last_offset, max_timestamp, now_ms)
        try:
            self._active.append(buf, batches)
        except OSError as exc:
            logger.exception("append to %s failed", self.directory)
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR, str(exc)) from exc

    def marker_appended(self, producer_id: int, txn_first_offset: int | None, offset: int) -> None:
        """Nothing to track: a marker counts once appended (this process writes all of them)."""

    def undecided_transactions(self, offset: int) -> list[tuple[int, int, int]]:
        return []  # every marker of this log is written by this process

    def learn_committed(self, producer_id: int, epoch: int, first_offset: int) -> None:
        return None  # never asked: ``undecided_transactions`` names none

    def _rebuild_producer_state(self) -> None:
        """Newest snapshot, then the batch headers written after it (records are not decoded)."""
        end = self.log_end_offset
        loaded = self.producers.load_latest_snapshot(end)
        self.producers.forget_aborted_before(self.log_start_offset)
        offset = max(loaded if loaded is not None else 0, self.log_start_offset)
        while offset < end:
            data = self.read(offset, REBUILD_CHUNK_BYTES).data
            if not data:
                break
            offset = replay(self.producers, data, offset)

    def _maybe_roll(
        self, size: int, first_offset: int, last_offset: int, max_timestamp: int, now_ms: int
    ) -> None:
        """Start a new segment when the active one is full, too old, or cannot index ``last_offset``."""
        active = self._active
        full = active.size > 0 and (
            active.size + size > self.config.segment_bytes
            or active.time_waited_for_roll(now_ms, max_timestamp) > self.config.segment_ms
        )
        if full or not active.can_hold(last_offset):
            self._roll(first_offset, now_ms)

    def _roll(self, base_offset: int, now_ms: int) -> None:
        snapshot = self.producers.encode_snapshot(base_offset)
        directory = self.directory
        self._submit(lambda: store_snapshot(directory, base_offset, snapshot))
        self._active.seal()
        segment = Segment(self.directory, base_offset, self.config.index_interval_bytes, now_ms, self.files)
        self._segments.append(segment)
        self._bases.append(base_offset)
        self._dir_dirty = True
        logger.debug("rolled %s at offset %d", self.directory, base_offset)

    # -- reading ---------------------------------------------------------------------------------

    def _readable_range(self, offset: int) -> tuple[int, int]:
        """(log start, log end) when ``offset`` lies within them, else OFFSET_OUT_OF_RANGE."""
        self.check_open()
        start, end = self.log_start_offset, self.log_end_offset
        if offset < start or offset > end:
            raise KafkaError(
                Errors.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is outside [{start}, {end}] of {self.directory.name}",
            )
        return start, end

    def read(
        self, offset: int, max_bytes: int, *, upper_bound: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        """Whole batches from the one holding ``offset``, below ``upper_bound``, within ``max_bytes``.

        The first batch is returned whole even when larger than ``max_bytes`` (unless
        ``min_one_batch`` is False, for later partitions of a fetch), as Kafka does, so a consumer
        can always make progress. Reads may span segments.
        """
        start, end = self._readable_range(offset)
        if offset == end or (upper_bound is not None and offset >= upper_bound):
            return ReadResult(b"", start, end)
        i = bisect.bisect_right(self._bases, offset) - 1
        files = ((segment.descriptor, segment.size) for segment in itertools.islice(self._segments, i, None))
        data = read_span(files, self._segments[i].index_position(offset), offset, max_bytes, upper_bound, min_one_batch)
        return ReadResult(data, start, end)

    def read_region(
        self, offset: int, max_bytes: int, *, upper_bound: int, min_one_batch: bool
    ) -> FileRegion | None:
        """The batches :meth:`read` would copy, located by their headers as a region of
        duplicated descriptors (valid after the segments are deleted); None below
        ``ZERO_COPY_MIN_BYTES`` of candidates (then reading is as cheap) or without a batch."""
        start, end = self._readable_range(offset)
        if offset >= min(end, upper_bound):
            return None
        i = bisect.bisect_right(self._bases, offset) - 1
        scan_from = self._segments[i].index_position(offset)
        candidates = sum(segment.size for segment in itertools.islice(self._segments, i, None)) - scan_from
        if min(max_bytes, candidates) < ZERO_COPY_MIN_BYTES:
            return None
        # Lazily: each descriptor is used (and duplicated) before the next segment is opened, which
        # may close a cached one (descriptor_cache.py).
        files = ((segment.descriptor, segment.size) for segment in itertools.islice(self._segments, i, None))
        return locate_span(files, scan_from, offset, max_bytes, upper_bound, min_one_batch, owned=False)

    def plan_cold_read(
        self, offset: int, max_bytes: int, isolation: IsolationLevel, *, zero_copy: bool = False
    ) -> ColdRead | None:
        """A Fetch read worth a worker thread (see ``span.py``): one that starts in a sealed
        segment (its pages are the likely ones to be off the cache), or a large one (a consumer
        catching up: ``LARGE_READ_BYTES`` or more to copy; with ``zero_copy`` nothing is copied,
        so only the sealed case). None: read it inline."""
        self.check_open()
        upper_bound = visible_end(self, isolation)
        if not self.log_start_offset <= offset < upper_bound:
            return None
        i = bisect.bisect_right(self._bases, offset) - 1
        first = self._segments[i]
        scan_from = first.index_position(offset)
        if first is self._active and (zero_copy or min(max_bytes, first.size - scan_from) < LARGE_READ_BYTES):
            return None
        files: list[tuple[int, int]] = []
        covered = -scan_from
        try:
            for segment in itertools.islice(self._segments, i, None):
                files.append((segment.duplicate_descriptor(), segment.size))
                covered += segment.size
                if covered > max_bytes:
                    break
        except OSError:
            for fd, _ in files:
                os.close(fd)
            raise
        return ColdRead(offset, max_bytes, upper_bound, scan_from, files, zero_copy)

    def plan_offset_lookup(self, timestamp: int) -> Callable[[], tuple[int, int] | None] | None:
        return None  # the indexes answer inline

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp >= ``timestamp``.

        The indexes find the batch; that one batch is then decoded for the exact record.
        """
        self.check_open()
        for segment in self._segments:
            if segment.next_offset <= self.log_start_offset:
                continue
            found = segment.find_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                return self._exact_record(found[0], lambda ts: ts >= timestamp) or (
                    max(found[0], self.log_start_offset),
                    found[1],
                )
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp, for ListOffsets -3."""
        self.check_open()
        best: tuple[int, int] | None = None
        for segment in self._segments:
            if segment.offset_of_max_timestamp >= 0 and (best is None or segment.max_timestamp > best[1]):
                best = max(segment.offset_of_max_timestamp, self.log_start_offset), segment.max_timestamp
        if best is None:
            return None
        target = best[1]
        return self._exact_record(best[0], lambda ts: ts == target) or best

    def _exact_record(self, batch_offset: int, wanted: Callable[[int], bool]) -> tuple[int, int] | None:
        """Narrow a batch-level answer to the first record in that batch matching ``wanted``.

        Only ListOffsets by timestamp comes here (never produce or fetch), so decoding the one
        batch is affordable and gives Kafka's record-exact answer.
        """
        return exact_record(self.read(max(batch_offset, self.log_start_offset), 1).data, self.log_start_offset, wanted)

    # -- retention and DeleteRecords -------------------------------------------------------------

    def apply_retention(self, now_ms: int) -> int:
        """Delete old whole segments by retention.ms then retention.bytes; returns how many."""
        self.check_open()
        deleted = 0
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_oldest(lambda segment: now_ms - segment.retention_timestamp() > retention_ms)
        if self.config.retention_bytes >= 0:
            excess = self.size_bytes - self.config.retention_bytes

            def over_limit(segment: Segment) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_oldest(over_limit)
        deleted += self._delete_oldest(lambda segment: segment.next_offset <= self.log_start_offset)
        self.producers.aborted = [a for a in self.producers.aborted if a.last_offset >= self.log_start_offset]
        return deleted

    def advance_log_start(self, offset: int) -> None:
        self._set_log_start_offset(offset)
        self._delete_oldest(lambda segment: segment.next_offset <= self.log_start_offset)

    def _delete_oldest(self, predicate: Callable[[Segment], bool]) -> int:
        """Delete segments from the oldest while ``predicate(segment)`` holds, never the active one."""
        doomed: list[Segment] = []
        for segment in self._segments[:-1]:
            if not predicate(segment):
                break
            doomed.append(segment)
        if not doomed:
            return 0
        # Persist the new start first: a crash then leaves a segment to delete again, never a gap.
        new_start = max(self.log_start_offset, self._segments[len(doomed)].base_offset)
        self._set_log_start_offset(new_start, persist=False)
        path = self.directory / LOG_START_FILE

        def checkpoint_then_delete() -> None:
            checkpoint.write_offset(path, new_start)
            for segment in doomed:
                logger.info("deleting segment %s (log start offset now %d)", segment.log_path, new_start)
                segment.delete()

        self._submit(checkpoint_then_delete)
        del self._segments[: len(doomed)]
        del self._bases[: len(doomed)]
        return len(doomed)

    def _set_log_start_offset(self, offset: int, *, persist: bool = True) -> None:
        self.log_start_offset = offset
        self.producers.forget_aborted_before(offset)
        if persist:
            path = self.directory / LOG_START_FILE
            self._submit(lambda: checkpoint.write_offset(path, offset))

    # -- truncation ------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after ``offset``; a batch straddling it goes whole, so the new
        log end offset may be below ``offset``. Below the log start the log restarts empty there."""
        self.check_open()
        if offset >= self.log_end_offset:
            return
        if offset < self.log_start_offset:
            self._truncate_fully(offset)
            return
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._segments.pop().delete()
            self._bases.pop()
        self._active.truncate_to_offset(offset)
        if self.log_start_offset > self.log_end_offset:
            self._set_log_start_offset(self.log_end_offset)
        self._lower_recovery_point()
        self._reset_producer_state()

    def _reset_producer_state(self) -> None:
        """After a truncation the producer table must forget the batches that are gone."""
        self.producers.reset()
        self._rebuild_producer_state()

    def _truncate_fully(self, offset: int) -> None:
        for segment in self._segments:
            segment.delete()
        self._segments = [
            Segment(self.directory, offset, self.config.index_interval_bytes, self.last_flush_ms, self.files)
        ]
        self._bases = [offset]
        self._dir_dirty = True
        self._set_log_start_offset(offset)
        self._lower_recovery_point()
        self._reset_producer_state()

    def _lower_recovery_point(self) -> None:
        self._truncations += 1  # a flush prepared before this covers offsets that may be gone
        if self._recovery_point != self.log_end_offset:
            self._recovery_point = lowered = min(self._recovery_point, self.log_end_offset)
            path = self.directory / RECOVERY_POINT_FILE
            self._submit(lambda: checkpoint.write_offset(path, lowered))

    # -- durability and lifecycle ----------------------------------------------------------------

    def flush(self, now_ms: int | None = None) -> None:
        """fsync everything appended since the last flush, then advance the recovery point, here
        and now (opening, closing, offline tools); the server flushes off the loop instead."""
        pending = self.begin_flush()
        pending.sync()
        self.finish_flush(pending, now_ms)

    def begin_flush(self) -> PendingFlush:
        """Capture what a flush must sync now: duplicated descriptors of the open files, the paths of
        those the descriptor cache closed, index entries to write (see ``flush.py``)."""
        self.check_open()
        pending = PendingFlush(self.log_end_offset, self._truncations)
        try:
            for segment in self._segments:
                if segment is self._active or segment.next_offset > self._recovery_point:
                    segment.capture_sync(pending)
        except OSError:
            pending.release()
            for write in pending.writes:
                write.failed()
            raise
        if self._dir_dirty:
            pending.directory = self.directory
            self._dir_dirty = False
        if self._parent_unsynced:
            pending.parent = self.directory.parent
            self._parent_unsynced = False
        if self.log_end_offset > self._recovery_point or self._checkpoint_missing:
            pending.checkpoint = self.directory / RECOVERY_POINT_FILE
            self._checkpoint_missing = False
        return pending

    def finish_flush(self, pending: PendingFlush, now_ms: int | None = None) -> None:
        """After ``pending.sync()``: the offsets it covered are durable, unless truncated since."""
        if self._closed:
            return
        if not pending.synced:
            for write in pending.writes:
                write.failed()
            self._dir_dirty = self._dir_dirty or pending.directory is not None
            self._checkpoint_missing = self._checkpoint_missing or pending.checkpoint is not None
            self._parent_unsynced = self._parent_unsynced or pending.parent is not None
            return
        end = min(pending.end_offset, self.log_end_offset)
        if pending.truncations == self._truncations and end > self._recovery_point:
            self._recovery_point = end  # the checkpoint file was written by ``pending.sync()``
        if now_ms is not None:
            self.last_flush_ms = now_ms

    def close(self) -> None:
        """Flush, then leave the clean-shutdown marker so the next open skips recovery."""
        if self._closed:
            return
        self._active.seal()
        self.flush()
        store_snapshot(self.directory, self.log_end_offset, self.producers.encode_snapshot(self.log_end_offset))
        checkpoint.write_marker(self.directory / MARKER_FILE)
        for segment in self._segments:
            segment.close()
        self._closed = True

    def _submit(self, job: Callable[[], None]) -> None:
        """Queue blocking file work in this partition's directory (dropped once it is deleted)."""
        submit(self.work, dropped_when_deleted(job, lambda: self._deleted, self.name))

    def delete(self) -> None:
        """Remove the partition directory and everything in it (DeleteTopics).

        The directory is renamed at once (a topic of the same name may be created right after),
        its files are removed by ``work``; ``remove_deleted`` finishes what a crash interrupted."""
        for segment in self._segments:
            segment.close()
        self._closed = self._deleted = True
        doomed = self.directory.with_name(f"{self.directory.name}.{uuid.uuid4().hex}{DELETED_SUFFIX}")
        try:
            self.directory.rename(doomed)
        except FileNotFoundError:
            return
        submit(self.work, lambda: shutil.rmtree(doomed, ignore_errors=True))

