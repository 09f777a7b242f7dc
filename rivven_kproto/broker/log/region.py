"""Fetch data as file regions: where whole batches lie in segment files, not the bytes themselves.

A plaintext Fetch sends segment bytes unchanged, so the server can hand them to the kernel
(``os.sendfile``) instead of reading them into Python. :func:`locate_batches` walks batch headers
only (one small ``pread`` per large batch; chunked reads when batches are small) to find the same
whole batches :func:`~rivven_kproto.broker.log.segment.read_batches` would copy, within the same
budget and below the same upper bound; a :class:`FileRegion` names them as (descriptor, position,
length) parts.

Each part owns a duplicated descriptor: retention or DeleteRecords may close and unlink the
segment while the response is being sent, and the duplicate keeps the inode and its bytes alive
until the region is released (segment files are never rewritten in place; only a truncation, which
a single-leader log does not do under a live reader, could shorten one). A region is released by
whoever sends it; ``__del__`` is the safety net for a response dropped on the way (cancellation).
"""

from __future__ import annotations

import abc
import logging
import os
from collections.abc import Generator, Iterable

from rivven_kproto.broker.log.segment import find_batch
from rivven_kproto.codec.records.batch import HEADER_SIZE, MIN_BATCH_LENGTH, parse_header
from rivven_kproto.codec.splice import ExternalBytes

log = logging.getLogger(__name__)

# Below this a region is read into bytes instead: a sendfile per tiny part costs more than it saves.
ZERO_COPY_MIN_BYTES = 32 * 1024
# Batches at least this large are located by reading their header alone; smaller ones by chunks.
LARGE_BATCH = 4096
HEADER_CHUNK = 16 * 1024


def locate_batches(
    fd: int, end: int, position: int, max_bytes: int, upper_bound: int | None, min_one: bool
) -> tuple[list[int], list[int], bool]:
    """The batches :func:`read_batches` would return from ``fd[position:end]``, by their headers:
    (end of each batch relative to ``position``, its next offset, whether ``end`` was reached)."""
    limit = position + min(max(max_bytes, 0), end - position)
    ends: list[int] = []
    next_offsets: list[int] = []
    pos = position
    buf, buf_start = b"", position
    want = HEADER_SIZE
    while end - pos >= HEADER_SIZE:
        rel = pos - buf_start
        if len(buf) - rel < HEADER_SIZE:
            size = min(end - pos, max(HEADER_SIZE, min(want, limit - pos)))
            buf, buf_start, rel = os.pread(fd, size, pos), pos, 0
            if len(buf) < HEADER_SIZE:
                break
        header = parse_header(buf, rel)
        batch_end = pos + header.size
        if header.batch_length < MIN_BATCH_LENGTH or batch_end > end:
            break  # a torn tail: what the bytes path's header scan stops at too
        if upper_bound is not None and header.base_offset >= upper_bound:
            break
        if batch_end > limit and not (min_one and not ends):
            break
        ends.append(batch_end - position)
        next_offsets.append(header.next_offset)
        pos = batch_end
        want = HEADER_SIZE if header.size >= LARGE_BATCH else HEADER_CHUNK
        if batch_end >= limit:
            break
    return ends, next_offsets, pos >= end


class BatchRegion(ExternalBytes):
    """Whole batches a Fetch answers with, named by where they lie rather than held: segment
    files (:class:`FileRegion`), a database's rows (the PostgreSQL engine's ``PgRegion``) or
    bytes another structure already holds (:class:`HeldBatches`). The server sends them as the
    connection takes them, so an unread response holds about a chunk of them, not all."""

    def __init__(self, batch_ends: list[int], next_offsets: list[int]) -> None:
        self.batch_ends = batch_ends  # where each batch ends, from the region's start
        self.next_offsets = next_offsets

    @property
    def size(self) -> int:
        return self.batch_ends[-1] if self.batch_ends else 0

    @property
    def end_offset(self) -> int:
        """The offset after the region's last batch."""
        return self.next_offsets[-1]

    def cut(self, max_bytes: int, min_one_batch: bool) -> int:
        """Keep the longest prefix of whole batches within ``max_bytes`` (the first whole with
        ``min_one_batch``), as ``span.whole_batches`` cuts bytes; returns the new size."""
        keep = 0
        for batch_end in self.batch_ends:
            if batch_end > max_bytes and not (min_one_batch and keep == 0):
                break
            keep += 1
        if keep == len(self.batch_ends):
            return self.size
        del self.batch_ends[keep:], self.next_offsets[keep:]
        self._keep(keep)
        return self.size

    @abc.abstractmethod
    def _keep(self, batches: int) -> None:
        """Drop what locates the batches after the first ``batches`` (``batch_ends`` is cut already)."""


class HeldBatches(BatchRegion):
    """Batches another structure holds as bytes objects (an engine's in-memory tail): referenced,
    not joined into a copy per response."""

    chunks_block = False

    def __init__(self, batches: list[bytes], next_offsets: list[int]) -> None:
        ends, total = [], 0
        for data in batches:
            total += len(data)
            ends.append(total)
        super().__init__(ends, next_offsets)
        self.batches = batches

    def _keep(self, batches: int) -> None:
        del self.batches[batches:]

    def read(self) -> bytes:
        return b"".join(self.batches)

    def chunks(self, size: int) -> Generator[bytes, None, None]:
        group: list[bytes] = []
        held = 0
        for data in self.batches:
            if group and held + len(data) > size:
                yield b"".join(group)
                group, held = [], 0
            group.append(data)
            held += len(data)
        if group:
            yield b"".join(group)

    def release(self) -> None:
        self.batches = []


class FileRegion(BatchRegion):
    """Whole batches lying in one or more segment files, as (owned descriptor, position, length) parts."""

    def __init__(self, parts: list[tuple[int, int, int]], batch_ends: list[int], next_offsets: list[int]) -> None:
        super().__init__(batch_ends, next_offsets)  # batch_ends: cumulative over the parts
        self.parts = parts

    def _keep(self, batches: int) -> None:
        size, covered = self.size, 0
        kept: list[tuple[int, int, int]] = []
        for fd, position, length in self.parts:
            if covered < size:
                kept.append((fd, position, min(length, size - covered)))
                covered += length
            else:
                os.close(fd)
        self.parts = kept

    def warm(self) -> None:
        """Bring the region's pages into the page cache now, on the calling (worker) thread, so
        the event loop's sendfile finds them there instead of waiting for the disk: a sendfile to
        /dev/null reads the pages without copying them anywhere (microseconds per MiB when cached)."""
        sink = os.open(os.devnull, os.O_WRONLY)
        try:
            for fd, position, length in self.parts:
                offset, end = position, position + length
                while offset < end and (sent := os.sendfile(sink, fd, offset, end - offset)) > 0:
                    offset += sent
        finally:
            os.close(sink)

    def read(self) -> bytes:
        chunks: list[bytes] = []
        for fd, position, length in self.parts:
            data = os.pread(fd, length, position)
            if len(data) != length:
                raise OSError(f"segment shortened under a fetch: {len(data)} of {length} bytes at {position}")
            chunks.append(data)
        return b"".join(chunks)

    def release(self) -> None:
        parts, self.parts = self.parts, []
        for fd, _, _ in parts:
            os.close(fd)

    def __del__(self) -> None:
        if self.parts:
            log.debug("releasing a file region that was never sent (%d bytes)", self.size)
            self.release()


def locate_span(
    files: Iterable[tuple[int, int]], scan_from: int, offset: int, max_bytes: int, upper_bound: int | None,
    min_one_batch: bool, *, owned: bool,
) -> FileRegion | None:
    """:func:`span.read_span` as a region: whole batches from the one holding ``offset`` across
    consecutive files. ``owned``: the descriptors are the caller's duplicates, handed over (those
    not needed are closed; ``files`` is then a list); else the parts get duplicates of their own,
    taken as each file is reached (``files`` may open them lazily). None: no batch."""
    parts: list[tuple[int, int, int]] = []
    used: set[int] = set()
    batch_ends: list[int] = []
    next_offsets: list[int] = []
    remaining, min_one, total = max_bytes, min_one_batch, 0
    try:
        for index, (fd, end) in enumerate(files):
            position = find_batch(fd, end, scan_from, offset) if index == 0 else 0
            if position is None:
                continue
            ends, nexts, at_end = locate_batches(fd, end, position, remaining, upper_bound, min_one)
            if ends:
                length = ends[-1]
                parts.append((fd if owned else os.dup(fd), position, length))
                used.add(index)
                batch_ends.extend(total + e for e in ends)
                next_offsets.extend(nexts)
                total += length
                remaining -= length
                min_one = False
            if not at_end or remaining <= 0:
                break
    except BaseException:
        if owned:
            used.clear()  # the finally clause closes every handed-over descriptor
        else:
            for fd, _, _ in parts:
                os.close(fd)
        raise
    finally:
        if owned:
            for index, (fd, _) in enumerate(files):
                if index not in used:
                    os.close(fd)
    if not parts:
        return None
    return FileRegion(parts, batch_ends, next_offsets)
