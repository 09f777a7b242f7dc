"""One log segment: a file of RecordBatch v2 bytes plus its offset and time indexes.

Files of a segment whose first offset is ``B`` (``B`` written as 20 zero-padded digits)::

    <B>.log        RecordBatch v2 batches back to back, byte for byte as served to consumers
                   (base offsets already assigned). No segment header, no padding, no footer:
                   the file ends after the last complete batch, except after a crash, when it may
                   end in a torn batch or garbage that recovery cuts off.
    <B>.index      sparse offset index, see ``index.py``
    <B>.timeindex  sparse time index, see ``index.py``

Only the ``.log`` file is opened while the broker runs, and only while it is among the most
recently used (``descriptor_cache.py``); the indexes are held in memory and written by flushes.

Within ``<B>.log`` batch base offsets are strictly increasing (gaps are allowed: a batch starts
after the previous batch's last offset), the first is ``>= B``, and every offset of the segment is
below ``B + 2**31`` so that it fits an index entry. Positions fit an int32 as well, since
``segment.bytes`` is at most ``Int.MAX``.

The ``.log`` file is the only truth: indexes are hints, checked against it when loaded and rebuilt
from it (by a header scan) when they disagree. Recovery verifies every batch (length, magic, CRC-32C,
offset order) and truncates the file at the first one that fails.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

from rivven_kproto.broker.durable.flush import PendingFlush
from rivven_kproto.broker.log.descriptor_cache import SHORTAGE_ERRNOS, DescriptorCache, LogFile, shared_cache
from rivven_kproto.broker.log.index import OffsetIndex, TimeIndex
from rivven_kproto.codec.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    crc_ok,
    header_problem,
    iter_headers,
    parse_header,
)

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
MAX_RELATIVE_OFFSET = (1 << 31) - 1
NO_TIMESTAMP = -1
SCAN_CHUNK = 1 << 20
LOOKUP_CHUNK = 16 << 10


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def offsets_problem(header: BatchHeader, next_offset: int, base_offset: int) -> str | None:
    """Recovery's offset rule for the next batch of a segment (None: it holds): offsets only
    grow, from the segment's base on, and stay within a relative offset of the segment."""
    if header.last_offset_delta < 0:
        return f"negative last offset delta {header.last_offset_delta}"
    if header.base_offset < next_offset:
        if next_offset == base_offset:
            return f"offset {header.base_offset} below the segment's base offset {base_offset}"
        return f"offset {header.base_offset} not above the previous batch's last offset {next_offset - 1}"
    if header.last_offset - base_offset > MAX_RELATIVE_OFFSET:
        return f"last offset {header.last_offset} too far above the segment's base offset {base_offset}"
    return None


def iter_file_batches(
    fd: int, start: int, end: int, *, verify: bool, chunk: int = SCAN_CHUNK
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of consecutive batches in ``fd[start:end]``.

    Stops silently at the first batch that is short, has a bad length or magic, or (with
    ``verify``) fails its CRC; the caller learns where from the last batch it saw.
    """
    pos = start
    buf = b""
    buf_start = start
    while end - pos >= HEADER_SIZE:
        rel = pos - buf_start
        if len(buf) - rel < HEADER_SIZE:
            buf, buf_start, rel = os.pread(fd, min(max(chunk, HEADER_SIZE), end - pos), pos), pos, 0
            if len(buf) < HEADER_SIZE:
                return
        header = parse_header(buf, rel)
        if header_problem(header, end - pos) is not None:
            return
        if verify:
            if len(buf) - rel < header.size:
                buf, buf_start, rel = os.pread(fd, min(max(chunk, header.size), end - pos), pos), pos, 0
            if len(buf) - rel < header.size or not crc_ok(buf, rel, header):
                return
        yield pos, header
        pos += header.size


def find_batch(fd: int, end: int, start: int, offset: int) -> int | None:
    """Position of the first batch in ``fd[start:end]`` ending after ``offset``, if any."""
    for pos, header in iter_file_batches(fd, start, end, verify=False, chunk=LOOKUP_CHUNK):
        if header.next_offset > offset:
            return pos
    return None


def read_batches(
    fd: int, end: int, position: int, max_bytes: int, upper_bound: int | None, min_one: bool
) -> tuple[bytes, bool]:
    """Whole batches of ``fd`` from ``position``: at most ``max_bytes`` unless ``min_one`` and the
    first is larger, none with a base offset >= ``upper_bound``. Returns (bytes, reached ``end``).
    Reads only below ``end``, so it may run on any thread against a file that is being appended."""
    want = min(max(max_bytes, 0), end - position)
    chunk = os.pread(fd, want, position) if want > 0 else b""
    taken = 0
    for rel, header in iter_headers(chunk):
        if upper_bound is not None and header.base_offset >= upper_bound:
            return chunk[:taken], False
        taken = rel + header.size
    if taken == 0 and min_one and end - position >= HEADER_SIZE:
        header = parse_header(os.pread(fd, HEADER_SIZE, position))
        if upper_bound is not None and header.base_offset >= upper_bound:
            return b"", False
        data = os.pread(fd, header.size, position)
        return data, position + len(data) >= end
    data = chunk if taken == len(chunk) else chunk[:taken]
    return data, position + taken >= end


class Segment:
    """A segment's files and the few facts about it kept in memory (size, offsets, timestamps)."""

    def __init__(
        self, directory: Path, base_offset: int, index_interval_bytes: int, now_ms: int,
        files: DescriptorCache | None = None,
    ) -> None:
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        stem = directory / segment_name(base_offset)
        self.log_path = stem.with_name(stem.name + LOG_SUFFIX)
        self.created_ms = now_ms
        self._file = LogFile(self.log_path, files if files is not None else shared_cache())
        self.index = OffsetIndex(stem.with_name(stem.name + INDEX_SUFFIX))
        self.time_index = TimeIndex(stem.with_name(stem.name + TIME_INDEX_SUFFIX))
        self.size = os.fstat(self._file.create()).st_size
        self._reset_stats()

    def _reset_stats(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.first_max_timestamp: int | None = None
        self._bytes_since_index = 0

    def __repr__(self) -> str:
        return f"Segment({self.log_path.name}, size={self.size}, next_offset={self.next_offset})"

    # -- loading and recovery -------------------------------------------------------------------

    def load(self) -> bool:
        """Load a segment trusted to be whole (clean shutdown) using its indexes.

        Returns False when the file does not end on a batch boundary, meaning it needs recovery.
        """
        trusted = self.index.load()
        trusted = self.time_index.load() and trusted
        self.index.truncate_from_position(self.size)
        last = self.index.last()
        if trusted and (last is None or self._entry_matches(*last)):
            end = self._rescan_tail()
            last_time = self.time_index.last()
            if last_time is None or self.base_offset + last_time[1] < self.next_offset:
                return end == self.size
        logger.warning("rebuilding the indexes of %s", self.log_path)
        self.index.reset()
        self.time_index.reset()
        return self._rescan_tail() == self.size

    def recover(self, hint_offset: int | None = None) -> int:
        """Verify every batch from a known-good point, cut the file at the first bad one.

        ``hint_offset`` (the recovery point) lets the scan start at the index entry at or below it,
        whose data was fsynced together with the index; otherwise the whole segment is scanned.
        Indexes are rebuilt for the scanned part. Returns the number of bytes cut off.
        """
        self.index.load()
        self.time_index.load()
        self.index.truncate_from_position(self.size)
        relative, start = 0, 0
        if hint_offset is not None and hint_offset > self.base_offset:
            relative, start = self.index.lookup(hint_offset - self.base_offset)
            if start and not self._entry_matches(relative, start):
                relative, start = 0, 0
        if start == 0:
            self.index.reset()
            self.time_index.reset()
        else:
            self.index.truncate_from_position(start + 1)
            self.time_index.truncate_from_offset(relative + 1)
        self._restore_stats(relative, start)
        end = self._scan(start, verify=True)
        cut = self.size - end
        if cut:
            logger.warning("%s: truncating %d invalid bytes at position %d", self.log_path, cut, end)
            self._truncate_file(end)
        return cut

    def _entry_matches(self, relative: int, position: int) -> bool:
        if position + HEADER_SIZE > self.size:
            return False
        header = parse_header(os.pread(self._file.descriptor(), HEADER_SIZE, position))
        return header.magic == 2 and header.base_offset == self.base_offset + relative

    def _restore_stats(self, relative: int, start: int) -> None:
        """Reset in-memory facts to what the indexes say holds before position ``start``."""
        self._reset_stats()
        self.next_offset = self.base_offset + relative
        last_time = self.time_index.last()
        if start and last_time is not None:
            self.max_timestamp = last_time[0]
            self.offset_of_max_timestamp = self.base_offset + last_time[1]
        if start and self.size >= HEADER_SIZE:
            self.first_max_timestamp = parse_header(os.pread(self._file.descriptor(), HEADER_SIZE, 0)).max_timestamp

    def _rescan_tail(self) -> int:
        """Recompute in-memory facts from the last index entry on; returns where the scan stopped."""
        relative, start = self.index.last() or (0, 0)
        self._restore_stats(relative, start)
        return self._scan(start, verify=False)

    def _scan(self, start: int, *, verify: bool) -> int:
        """Absorb the batches from ``start`` (indexing them) until the first bad one; return its position."""
        end = start
        entries: list[tuple[int, int]] = []
        for pos, header in iter_file_batches(self._file.descriptor(), start, self.size, verify=verify):
            if not self._offsets_plausible(header):
                logger.warning("%s: batch at %d breaks offset order", self.log_path, pos)
                break
            self._absorb(pos, header)
            if pos == start:
                self._bytes_since_index = header.size  # already indexed (or the segment's first batch)
            else:
                self._index_batch(pos, header, entries)
            end = pos + header.size
        self.index.append(entries)
        return end

    def _offsets_plausible(self, header: BatchHeader) -> bool:
        return offsets_problem(header, self.next_offset, self.base_offset) is None

    # -- appending -------------------------------------------------------------------------------

    def _absorb(self, pos: int, header: BatchHeader) -> None:
        if pos == 0:
            self.first_max_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.base_offset
        self.next_offset = header.next_offset

    def _index_batch(self, pos: int, header: BatchHeader, entries: list[tuple[int, int]]) -> None:
        """Kafka's rule: index a batch once more than index.interval.bytes precede it unindexed."""
        if self._bytes_since_index > self.index_interval_bytes:
            entries.append((header.base_offset - self.base_offset, pos))
            if self.offset_of_max_timestamp >= 0:
                self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
            self._bytes_since_index = 0
        self._bytes_since_index += header.size

    def can_hold(self, last_offset: int) -> bool:
        """Whether ``last_offset`` still fits a relative offset of this segment."""
        return last_offset - self.base_offset <= MAX_RELATIVE_OFFSET

    def append(self, data: bytes | bytearray, batches: list[tuple[int, BatchHeader]]) -> int:
        """Write ``data`` (whose batches start at the given positions) with one pwrite; return its position."""
        position = self.size
        view = memoryview(data)
        written = 0
        fd = self._file.descriptor()
        try:
            while written < len(view):
                written += os.pwrite(fd, view[written:], position + written)
        except OSError:
            os.ftruncate(fd, position)
            raise
        self.size += len(view)
        entries: list[tuple[int, int]] = []
        for relative_pos, header in batches:
            self._absorb(position + relative_pos, header)
            self._index_batch(position + relative_pos, header, entries)
        self.index.append(entries)
        return position

    def time_waited_for_roll(self, now_ms: int, incoming_max_timestamp: int) -> int:
        """Kafka's segment.ms clock: batch timestamps when the segment has them, else wall time."""
        if self.first_max_timestamp is not None and self.first_max_timestamp >= 0:
            return incoming_max_timestamp - self.first_max_timestamp
        return now_ms - self.created_ms

    def seal(self) -> None:
        """Record the final max timestamp in the time index (on roll and close)."""
        if self.offset_of_max_timestamp >= 0:
            self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)

    # -- reading ---------------------------------------------------------------------------------

    def find_position(self, offset: int) -> int | None:
        """Position of the first batch ending after ``offset`` (the one holding it, or the next)."""
        if offset >= self.next_offset:
            return None
        return find_batch(self._file.descriptor(), self.size, self.index_position(offset), offset)

    def index_position(self, offset: int) -> int:
        """Where a scan for ``offset`` may start, by the offset index (in memory)."""
        _, start = self.index.lookup(offset - self.base_offset)
        return start if start < self.size else 0

    def read(
        self, position: int, max_bytes: int, upper_bound: int | None, min_one: bool
    ) -> tuple[bytes, bool]:
        """Whole batches from ``position`` (see :func:`read_batches`)."""
        return read_batches(self._file.descriptor(), self.size, position, max_bytes, upper_bound, min_one)

    @property
    def descriptor(self) -> int:
        """The log file's descriptor, valid until the next segment file is opened (use it at once)."""
        return self._file.descriptor()

    def duplicate_descriptor(self) -> int:
        """A descriptor of the log file that stays valid after the segment is closed or deleted."""
        return os.dup(self._file.descriptor())

    def find_timestamp(self, timestamp: int, min_offset: int = 0) -> tuple[int, int] | None:
        """(base offset, max timestamp) of the first batch ending after ``min_offset`` whose max
        timestamp is >= ``timestamp``; the time index says where the search may start."""
        if self.offset_of_max_timestamp < 0 or self.max_timestamp < timestamp:
            return None
        start = self.find_position(max(self.base_offset + self.time_index.lookup(timestamp), min_offset))
        if start is None:
            return None
        for _, header in iter_file_batches(self._file.descriptor(), start, self.size, verify=False, chunk=LOOKUP_CHUNK):
            if header.max_timestamp >= timestamp:
                return header.base_offset, header.max_timestamp
        return None

    def batch_at(self, position: int) -> BatchHeader:
        return parse_header(os.pread(self._file.descriptor(), HEADER_SIZE, position))

    # -- truncation, durability, lifecycle -------------------------------------------------------

    def truncate_to_offset(self, offset: int) -> None:
        """Drop the batch holding ``offset`` and everything after it."""
        position = self.find_position(offset)
        if position is None:
            return
        first_dropped = self.batch_at(position).base_offset
        self.time_index.truncate_from_offset(first_dropped - self.base_offset)
        self._truncate_file(position)
        self._rescan_tail()

    def _truncate_file(self, position: int) -> None:
        os.ftruncate(self._file.descriptor(), position)
        self.size = position
        self.index.truncate_from_position(position)

    def capture_sync(self, pending: PendingFlush) -> None:
        """Add what a flush must make durable of this segment to ``pending``: a duplicate of the log
        file's descriptor when it is open, else its path (the cache closed it, maybe with writes
        not yet synced), and the index entries written since the last flush."""
        fd = self._file.fd
        duplicate = -1
        if fd >= 0:
            try:
                duplicate = os.dup(fd)
            except OSError as exc:
                if exc.errno not in SHORTAGE_ERRNOS:
                    raise
        if duplicate >= 0:
            pending.descriptors.append(duplicate)
        else:
            pending.paths.append(self.log_path)
        for index in (self.index, self.time_index):
            write = index.take_write()
            if write is not None:
                pending.writes.append(write)

    def write_indexes(self) -> None:
        """Write index entries still owed to the files, here and now (a sealed segment at open)."""
        self.index.write_now()
        self.time_index.write_now()

    def is_open(self) -> bool:
        """Whether the log file's descriptor is open now (in the cache)."""
        return self._file.fd >= 0

    def last_modified_ms(self) -> int:
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    def retention_timestamp(self) -> int:
        """Kafka's retention clock: the newest batch timestamp, else the file's modification time."""
        if self.offset_of_max_timestamp >= 0 and self.max_timestamp >= 0:
            return self.max_timestamp
        return self.last_modified_ms()

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.index.path, self.time_index.path):
            path.unlink(missing_ok=True)
