"""Producer id allocation: unique for the life of the storage, never reused after a restart.

Ids are handed out from blocks reserved in the storage before any of their ids is used: with the
native log ``<data_dir>/meta/producer-ids`` holds (as text) the first id *not* yet reserved,
replaced atomically and fsynced; on PostgreSQL a counter row is advanced in a transaction, so
several brokers never share a block. After a crash the rest of a block is skipped, so an id is
never given twice. The first block is reserved when the broker opens; the next one is reserved by
``work`` (off the event loop) once half of the current block is used, so allocating never waits
for the storage unless a burst uses up a block before the flusher's next round (then it reserves
at once).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from .durable.files import read_offset, write_offset
from .durable.work import BlockingWork, submit

BLOCK_SIZE = 1000


class BlockSource(Protocol):
    def reserve(self, size: int) -> tuple[int, int]:
        """Durably reserve ``size`` ids; the block [start, end). Any thread."""
        ...


class FileBlocks:
    """Blocks reserved in ``<meta_dir>/producer-ids`` (the native log)."""

    def __init__(self, meta_dir: Path) -> None:
        self.path = meta_dir / "producer-ids"
        self._lock = threading.Lock()
        self._end: int | None = None

    def reserve(self, size: int) -> tuple[int, int]:
        with self._lock:
            start = self._end if self._end is not None else read_offset(self.path) or 0
            write_offset(self.path, start + size)
            self._end = start + size
            return start, start + size


class ProducerIdAllocator:
    def __init__(
        self, blocks: Path | BlockSource, block_size: int = BLOCK_SIZE, work: BlockingWork | None = None
    ) -> None:
        self.blocks = FileBlocks(blocks) if isinstance(blocks, Path) else blocks
        self.block_size = block_size
        self.work = work
        self._lock = threading.Lock()  # the flusher's thread hands over the spare block
        self._next, self._end = self.blocks.reserve(block_size)
        self._spare: tuple[int, int] | None = None
        self._requested = False

    def _reserve_spare(self) -> None:
        block = self.blocks.reserve(self.block_size)
        with self._lock:
            if self._spare is None:
                self._spare = block  # else a burst reserved at once meanwhile: this block is skipped

    def allocate(self) -> int:
        if self._next >= self._end:
            with self._lock:
                spare, self._spare = self._spare, None
            if spare is None:  # the next block's reservation has not run yet
                spare = self.blocks.reserve(self.block_size)
            self._next, self._end = spare
            self._requested = False
        elif not self._requested and self._end - self._next <= self.block_size // 2:
            self._requested = True
            submit(self.work, self._reserve_spare)
        producer_id = self._next
        self._next += 1
        return producer_id
