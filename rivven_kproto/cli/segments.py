"""Offline walk over segment files, for ``kproto log dump|verify``; never opens the broker's log.

A data directory holds ``<topic>-<partition>/`` directories of ``<20-digit base offset>.log``
segments (see ``broker/log/segment.py``): RecordBatch v2 back to back, nothing else. The walk reads
each batch header, checks it as recovery does (length, magic, batch inside the file, offsets
increasing and not below the segment's base, CRC-32C) and reports every batch, or the damage that
stops the walk: after a torn or implausible header there is no next batch to find.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from rivven_kproto.broker.log.segment import offsets_problem
from rivven_kproto.codec.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    compute_crc,
    header_problem,
    parse_header,
)

SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")


@dataclass
class ScannedBatch:
    """One batch whose header is plausible; ``problem`` is set when its CRC or offset is wrong."""

    position: int
    header: BatchHeader
    data: bytes
    computed_crc: int
    problem: str | None = None


@dataclass
class Damage:
    """Bytes at ``position`` that are not a batch; nothing after them can be read."""

    position: int
    offset: int | None  # the base offset claimed by the header, if one could be read
    problem: str


def _partition_sort_key(directory: Path) -> tuple[str, int, str]:
    topic, _, partition = directory.name.rpartition("-")
    return (topic, int(partition), "") if partition.isdigit() else (directory.name, -1, directory.name)


def segment_files(path: Path) -> list[Path]:
    """Segments of a data directory, a partition directory or a single ``.log`` file, in log order.

    FileNotFoundError if ``path`` does not exist; a directory without segments gives an empty list.
    """
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    if path.is_file():
        return [path]
    direct = sorted(p for p in path.iterdir() if SEGMENT_FILE.match(p.name))
    if direct:
        return direct
    found = []
    for directory in sorted((d for d in path.iterdir() if d.is_dir()), key=_partition_sort_key):
        found.extend(sorted(p for p in directory.iterdir() if SEGMENT_FILE.match(p.name)))
    return found


def segment_base_offset(path: Path) -> int | None:
    match = SEGMENT_FILE.match(path.name)
    return int(match.group(1)) if match else None


def scan_segment(stream: BinaryIO, size: int, base_offset: int | None = None) -> Iterator[ScannedBatch | Damage]:
    """Yield each batch of the segment in ``stream`` (``size`` bytes), then any damage that ends it.

    The checks are recovery's own (``codec.records.batch.header_problem`` and
    ``broker.log.segment.offsets_problem``), so what ``kproto log verify`` calls damage is exactly
    what the broker would cut off when it recovers the segment."""
    position = 0
    next_offset: int | None = base_offset
    segment_base = base_offset
    while position < size:
        stream.seek(position)
        head = stream.read(HEADER_SIZE)
        if len(head) < HEADER_SIZE:
            yield Damage(position, None, f"torn batch: {size - position} bytes left, a batch header needs {HEADER_SIZE}")
            return
        header = parse_header(head)
        damage = header_problem(header, size - position)
        if damage is not None:
            yield Damage(position, header.base_offset, damage)
            return
        stream.seek(position)
        data = stream.read(header.size)
        computed = compute_crc(data, 0, header.size)
        problem = None
        if segment_base is None:  # a file not named by its base offset: trust its first batch
            segment_base = header.base_offset
        problem = offsets_problem(header, segment_base if next_offset is None else next_offset, segment_base)
        if problem is None and computed != header.crc:
            problem = f"CRC mismatch (stored 0x{header.crc:08x}, computed 0x{computed:08x})"
        yield ScannedBatch(position, header, data, computed, problem)
        next_offset = header.next_offset
        position += header.size
