"""Sparse offset and time indexes of one segment: in-memory arrays mirrored in append-only files.

``<base>.index``: 8-byte entries, big-endian ``(relative base offset int32, file position int32)``,
both strictly increasing. An entry says "the batch whose base offset is ``base + relative`` starts
at ``position`` in ``<base>.log``". One entry is added each time more than
``index.interval.bytes`` were appended since the previous entry.

``<base>.timeindex``: 12-byte entries, big-endian ``(max timestamp int64, relative offset int32)``,
timestamps strictly increasing, offsets non-decreasing. An entry says "up to this point of the
segment the largest batch max timestamp is ``timestamp``, first reached by the batch whose base
offset is ``base + relative``". Added at the same points as offset-index entries (only when the
timestamp grew) and once more when a segment is rolled or closed.

Both files are hints, held in memory and written (and fsynced) by the flushes that sync the log,
so a file is never ahead of the synced log. They are checked against the log when loaded; anything
unparsable, out of order or past the log end is dropped (and the segment rebuilds them from the
log when that leaves them unusable). Files have no preallocated tail,
so their size is always a whole number of entries unless a crash tore the last write.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rivven_kproto.broker.durable.files import fsync

logger = logging.getLogger(__name__)

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


@dataclass
class IndexWrite:
    """What a flush writes of one index file: the entries since its last write, then the file cut
    to the index's length. Runs once, on any thread, by path (an index holds no descriptor)."""

    index: _IndexFile
    path: Path
    first: int  # entries already in the file
    raw: bytes  # entries ``first`` onwards
    count: int  # the index's length when captured
    file_entries: int  # how many entries the file may have held before this write

    def apply(self) -> None:
        """Write, cut and fsync the file; a vanished directory (deleted partition) is skipped."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        except FileNotFoundError:
            logger.debug("index %s vanished with its partition", self.path)
            return
        try:
            size = self.index.entry_size
            view = memoryview(self.raw)
            position = self.first * size
            while view:
                written = os.pwrite(fd, view, position)
                view, position = view[written:], position + written
            os.ftruncate(fd, self.count * size)
            fsync(fd)
        finally:
            os.close(fd)

    def failed(self) -> None:
        """The flush did not complete: the next one writes these entries again."""
        self.index.unwritten(self.first, max(self.count, self.file_entries))


class _IndexFile:
    """The file half of an index: entries live in memory and reach the file at flushes.

    The file holds no descriptor between flushes: ``take_write`` hands a flush the entries appended
    (or the cut made) since the previous one, and the flush writes them by path on a worker thread
    together with the log's fsync, so the index on disk is never ahead of the synced log and the
    append path makes no index syscall.
    """

    entry_size: int

    def __init__(self, path: Path) -> None:
        self.path = path
        self._written = 0  # leading entries the file holds as memory does
        self._file_entries = 0  # entries (whole or torn) the file may hold: more than memory means a cut is owed

    def __len__(self) -> int:
        raise NotImplementedError

    def _read_file(self) -> tuple[bytes, bool]:
        """The file's whole entries and whether that was all of it (an absent file is empty)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        self._file_entries = -(-len(data) // self.entry_size)
        whole = len(data) % self.entry_size == 0
        return data[: len(data) - len(data) % self.entry_size], whole

    def _loaded(self) -> None:
        self._written = len(self)

    def _cut_to(self, count: int) -> None:
        self._written = min(self._written, count)

    def _encode(self, first: int) -> bytes:
        raise NotImplementedError

    def take_write(self) -> IndexWrite | None:
        """The file write a flush must make now, or None when the file is up to date."""
        count = len(self)
        if self._written == count and self._file_entries <= count:
            return None
        write = IndexWrite(self, self.path, self._written, self._encode(self._written), count, self._file_entries)
        self._written = self._file_entries = count
        return write

    def unwritten(self, first: int, file_entries: int) -> None:
        """A captured write was lost: entries from ``first`` on are owed to the file again, and the
        file may hold up to ``file_entries``."""
        self._written = min(self._written, first)
        self._file_entries = max(self._file_entries, file_entries)

    def write_now(self) -> None:
        """Bring the file up to date here (closing a log, offline tools)."""
        write = self.take_write()
        if write is not None:
            write.apply()


def _strictly_increasing(values: array) -> bool:
    return all(a < b for a, b in zip(values, values[1:], strict=False))


def _non_decreasing(values: array) -> bool:
    return all(a <= b for a, b in zip(values, values[1:], strict=False))


class OffsetIndex(_IndexFile):
    """Relative base offset -> file position, for starting a header scan near an offset."""

    entry_size = OFFSET_ENTRY.size

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.offsets = array("i")
        self.positions = array("i")

    def __len__(self) -> int:
        return len(self.offsets)

    def load(self) -> bool:
        """Read the file; keep the longest well-formed prefix and say whether it was all of it."""
        data, whole = self._read_file()
        flat = array("i")
        flat.frombytes(data)
        if sys.byteorder == "little":
            flat.byteswap()
        self.offsets, self.positions = flat[0::2], flat[1::2]
        self._loaded()
        if (
            (self.offsets and (self.offsets[0] < 0 or self.positions[0] < 0))
            or not _strictly_increasing(self.offsets)
            or not _strictly_increasing(self.positions)
        ):
            self._keep(self._valid_prefix())
            return False
        return whole

    def _valid_prefix(self) -> int:
        count = 0
        prev_offset = prev_position = -1
        for offset, position in zip(self.offsets, self.positions, strict=True):
            if offset <= prev_offset or position <= prev_position:
                break
            prev_offset, prev_position = offset, position
            count += 1
        return count

    def _keep(self, count: int) -> None:
        del self.offsets[count:]
        del self.positions[count:]
        self._cut_to(count)

    def reset(self) -> None:
        self._keep(0)

    def last(self) -> tuple[int, int] | None:
        if not self.offsets:
            return None
        return self.offsets[-1], self.positions[-1]

    def lookup(self, relative_offset: int) -> tuple[int, int]:
        """The last entry at or below ``relative_offset``, or (0, 0): start of the segment."""
        i = bisect.bisect_right(self.offsets, relative_offset) - 1
        if i < 0:
            return 0, 0
        return self.offsets[i], self.positions[i]

    def append(self, entries: Sequence[tuple[int, int]]) -> None:
        for offset, position in entries:
            self.offsets.append(offset)
            self.positions.append(position)

    def _encode(self, first: int) -> bytes:
        flat = array("i", bytes(8 * (len(self.offsets) - first)))
        flat[0::2], flat[1::2] = self.offsets[first:], self.positions[first:]
        if sys.byteorder == "little":
            flat.byteswap()
        return flat.tobytes()

    def truncate_from_position(self, position: int) -> None:
        """Drop entries pointing at or past ``position`` (the log was cut there)."""
        count = bisect.bisect_left(self.positions, position)
        if count < len(self.positions):
            self._keep(count)


class TimeIndex(_IndexFile):
    """Max timestamp so far -> relative offset, for starting a timestamp search near its answer."""

    entry_size = TIME_ENTRY.size

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.timestamps = array("q")
        self.offsets = array("i")

    def __len__(self) -> int:
        return len(self.offsets)

    def load(self) -> bool:
        """Read the file; keep the longest well-formed prefix and say whether it was all of it."""
        data, whole = self._read_file()
        self.timestamps, self.offsets = array("q"), array("i")
        for timestamp, offset in TIME_ENTRY.iter_unpack(data):
            self.timestamps.append(timestamp)
            self.offsets.append(offset)
        self._loaded()
        if (
            (self.offsets and self.offsets[0] < 0)
            or not _strictly_increasing(self.timestamps)
            or not _non_decreasing(self.offsets)
        ):
            self._keep(self._valid_prefix())
            return False
        return whole

    def _valid_prefix(self) -> int:
        count = 0
        prev_timestamp, prev_offset = -(1 << 63), 0
        for timestamp, offset in zip(self.timestamps, self.offsets, strict=True):
            if timestamp <= prev_timestamp or offset < prev_offset:
                break
            prev_timestamp, prev_offset = timestamp, offset
            count += 1
        return count

    def _keep(self, count: int) -> None:
        del self.timestamps[count:]
        del self.offsets[count:]
        self._cut_to(count)

    def reset(self) -> None:
        self._keep(0)

    def last(self) -> tuple[int, int] | None:
        if not self.offsets:
            return None
        return self.timestamps[-1], self.offsets[-1]

    def lookup(self, timestamp: int) -> int:
        """A relative offset at or before the first batch whose max timestamp >= ``timestamp``.

        Every batch up to an entry with a smaller timestamp is older than ``timestamp``, so the
        search may start at the batch that entry names.
        """
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else 0

    def append(self, timestamp: int, relative_offset: int) -> None:
        """Add an entry if ``timestamp`` grew; older or equal timestamps add nothing."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        self.timestamps.append(timestamp)
        self.offsets.append(relative_offset)

    def _encode(self, first: int) -> bytes:
        return b"".join(
            TIME_ENTRY.pack(timestamp, offset)
            for timestamp, offset in zip(self.timestamps[first:], self.offsets[first:], strict=True)
        )

    def truncate_from_offset(self, relative_offset: int) -> None:
        """Drop entries naming offsets at or past ``relative_offset`` (the log was cut there)."""
        count = bisect.bisect_left(self.offsets, relative_offset)
        if count < len(self.offsets):
            self._keep(count)
