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

from rivven_kproto.codec.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    compute_crc,
    parse_header,
)

SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")
MAGIC_V2 = 2
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


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
    """Yield each batch of the segment in ``stream`` (``size`` bytes), then any damage that ends it."""
    position = 0
    previous_last: int | None = None
    while position < size:
        stream.seek(position)
        head = stream.read(HEADER_SIZE)
        if len(head) < HEADER_SIZE:
            yield Damage(position, None, f"torn batch: {size - position} bytes left, a batch header needs {HEADER_SIZE}")
            return
        header = parse_header(head)
        if header.magic != MAGIC_V2:
            yield Damage(position, header.base_offset, f"unsupported magic {header.magic} (expected 2)")
            return
        if header.batch_length < MIN_BATCH_LENGTH:
            yield Damage(position, header.base_offset, f"batch length {header.batch_length} below the minimum {MIN_BATCH_LENGTH}")
            return
        if position + header.size > size:
            yield Damage(position, header.base_offset, f"torn batch: {header.size} bytes declared, {size - position} present")
            return
        stream.seek(position)
        data = stream.read(header.size)
        computed = compute_crc(data, 0, header.size)
        problem = None
        if header.last_offset_delta < 0:
            problem = f"negative last offset delta {header.last_offset_delta}"
        elif previous_last is not None and header.base_offset <= previous_last:
            problem = f"offset {header.base_offset} not above the previous batch's last offset {previous_last}"
        elif previous_last is None and base_offset is not None and header.base_offset < base_offset:
            problem = f"offset {header.base_offset} below the segment's base offset {base_offset}"
        elif computed != header.crc:
            problem = f"CRC mismatch (stored 0x{header.crc:08x}, computed 0x{computed:08x})"
        yield ScannedBatch(position, header, data, computed, problem)
        previous_last = header.last_offset
        position += header.size
