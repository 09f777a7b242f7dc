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

Both files are hints: they are written without fsync on the append path and are checked against
the log when loaded; anything unparsable, out of order or past the log end is dropped (and the
segment rebuilds them from the log when that leaves them unusable). Files have no preallocated tail,
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
from pathlib import Path

from rivven_kproto.broker.durable.files import fsync

logger = logging.getLogger(__name__)

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


class _IndexFile:
    """The file half of an index: positional writes so truncation and appends never disagree.

    The descriptor is opened on demand and may be released once the file is synced, so sealed
    segments hold only their ``.log`` descriptor.
    """

    entry_size: int

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._dirty = False

    def _handle(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def _file_size(self) -> int:
        return os.fstat(self._handle()).st_size

    def _read_file(self) -> bytes:
        data = os.pread(self._handle(), self._file_size(), 0)
        return data[: len(data) - len(data) % self.entry_size]

    def _write_at(self, count: int, raw: bytes) -> None:
        os.pwrite(self._handle(), raw, count * self.entry_size)
        self._dirty = True

    def _cut_file(self, count: int) -> None:
        os.ftruncate(self._handle(), count * self.entry_size)
        self._dirty = True

    def flush(self) -> None:
        if self._dirty:
            fsync(self._handle())
            self._dirty = False

    def take_dirty_descriptor(self) -> int | None:
        """A duplicate descriptor to fsync elsewhere if the file was written; it counts as synced."""
        if not self._dirty:
            return None
        duplicate = os.dup(self._handle())
        self._dirty = False
        return duplicate

    def release(self) -> None:
        """Sync if needed, then close the descriptor until the next write."""
        self.flush()
        self.close()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


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
        data = self._read_file()
        flat = array("i")
        flat.frombytes(data)
        if sys.byteorder == "little":
            flat.byteswap()
        self.offsets, self.positions = flat[0::2], flat[1::2]
        whole = self._file_size() == len(data)
        if (
            (self.offsets and (self.offsets[0] < 0 or self.positions[0] < 0))
            or not _strictly_increasing(self.offsets)
            or not _strictly_increasing(self.positions)
        ):
            self._keep(self._valid_prefix())
            return False
        if not whole:
            self._cut_file(len(self.offsets))
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
        self._cut_file(count)

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
        raw = b"".join(OFFSET_ENTRY.pack(offset, position) for offset, position in entries)
        if raw:
            self._write_at(len(self.offsets), raw)
            for offset, position in entries:
                self.offsets.append(offset)
                self.positions.append(position)

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
        data = self._read_file()
        self.timestamps, self.offsets = array("q"), array("i")
        for timestamp, offset in TIME_ENTRY.iter_unpack(data):
            self.timestamps.append(timestamp)
            self.offsets.append(offset)
        whole = self._file_size() == len(data)
        if (
            (self.offsets and self.offsets[0] < 0)
            or not _strictly_increasing(self.timestamps)
            or not _non_decreasing(self.offsets)
        ):
            self._keep(self._valid_prefix())
            return False
        if not whole:
            self._cut_file(len(self.offsets))
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
        self._cut_file(count)

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
        self._write_at(len(self.offsets), TIME_ENTRY.pack(timestamp, relative_offset))
        self.timestamps.append(timestamp)
        self.offsets.append(relative_offset)

    def truncate_from_offset(self, relative_offset: int) -> None:
        """Drop entries naming offsets at or past ``relative_offset`` (the log was cut there)."""
        count = bisect.bisect_left(self.offsets, relative_offset)
        if count < len(self.offsets):
            self._keep(count)
