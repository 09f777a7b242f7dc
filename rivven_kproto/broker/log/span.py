"""Reading whole batches across consecutive segment files, on the log's thread or a worker's.

A read names the files as (descriptor, end) pairs: the segment holding the wanted offset and those
after it. Only bytes below each ``end`` are read, so a read may run on a worker thread while the
event loop appends to the active segment; given duplicated descriptors (``ColdRead``) it also
survives the segments being closed or deleted meanwhile (a duplicate keeps the inode alive).
Fetch prepares reads that start in a sealed segment (their pages are the likely ones to be off the
page cache) or that may copy a lot (a consumer catching up) as a ``ColdRead`` and runs them on a
worker thread; small reads of the active segment stay on the loop.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from rivven_kproto.broker.log.region import ZERO_COPY_MIN_BYTES, FileRegion, locate_span
from rivven_kproto.broker.log.segment import find_batch, read_batches
from rivven_kproto.codec.records.batch import iter_headers


def read_span(
    files: Iterable[tuple[int, int]], scan_from: int, offset: int, max_bytes: int, upper_bound: int | None,
    min_one_batch: bool,
) -> bytes:
    """Whole batches from the one holding ``offset`` (searched from ``scan_from`` in the first
    file), below ``upper_bound``, within ``max_bytes`` (the first batch whole with ``min_one_batch``)."""
    parts: list[bytes] = []
    remaining, min_one = max_bytes, min_one_batch
    position: int | None = None
    for index, (fd, end) in enumerate(files):
        position = find_batch(fd, end, scan_from, offset) if index == 0 else 0
        if position is None:
            continue
        data, at_end = read_batches(fd, end, position, remaining, upper_bound, min_one)
        if data:
            parts.append(data)
            remaining -= len(data)
            min_one = False
        if not at_end or remaining <= 0:
            break
    return b"".join(parts)


@dataclass
class ColdRead:
    """A read of sealed segments, prepared on the loop, run once on any thread.

    ``zero_copy``: locate the batches instead of copying them (a :class:`FileRegion` the server
    sends with ``sendfile``), and bring its pages into the page cache here, so that sending on
    the event loop does not wait for the disk; a region smaller than ``ZERO_COPY_MIN_BYTES`` is
    read into bytes all the same."""

    offset: int
    max_bytes: int
    upper_bound: int
    scan_from: int
    files: list[tuple[int, int]]  # duplicated descriptors (closed by ``run``) and ends
    zero_copy: bool = False

    def run(self) -> bytes | FileRegion:
        if self.zero_copy:
            files, self.files = self.files, []
            region = locate_span(files, self.scan_from, self.offset, self.max_bytes, self.upper_bound, True, owned=True)
            if region is None:
                return b""
            try:
                if region.size < ZERO_COPY_MIN_BYTES:
                    data = region.read()
                    region.release()
                    return data
                region.warm()
            except BaseException:
                region.release()
                raise
            return region
        try:
            return read_span(self.files, self.scan_from, self.offset, self.max_bytes, self.upper_bound, True)
        finally:
            self.release()

    def release(self) -> None:
        for fd, _ in self.files:
            os.close(fd)
        self.files = []


def whole_batches(data: bytes, max_bytes: int, min_one_batch: bool) -> bytes:
    """The longest prefix of ``data`` made of whole batches within ``max_bytes`` (the first batch
    whole with ``min_one_batch``): what a read with that budget returns, cut from a larger read."""
    taken = 0
    for position, header in iter_headers(data):
        end = position + header.size
        if end > max_bytes and not (min_one_batch and position == 0):
            break
        taken = end
    return data if taken == len(data) else data[:taken]
