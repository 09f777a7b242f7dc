"""Producer id allocation: unique for the life of the data directory, never reused after a restart.

Ids are reserved in blocks: ``<data_dir>/meta/producer-ids`` holds (as text) the first id *not*
yet reserved, replaced atomically and fsynced before any id of a block is handed out. After a
crash the rest of the current block is skipped, so an id is never given twice. The first block is
reserved when the broker opens; the next one is reserved by ``work`` (off the event loop) once half
of the current block is used, so allocating never waits for the disk unless a burst uses up half a
block before the flusher's next round (then it reserves at once).
"""

from __future__ import annotations

import threading
from pathlib import Path

from .durable.files import read_offset, write_offset
from .durable.work import BlockingWork, submit

BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, meta_dir: Path, block_size: int = BLOCK_SIZE, work: BlockingWork | None = None) -> None:
        self.path = meta_dir / "producer-ids"
        self.block_size = block_size
        self.work = work
        self._lock = threading.Lock()  # the loop (in a burst) and the flusher's thread both reserve
        self._next = read_offset(self.path) or 0
        self._reserved = self._next  # ids below this are reserved on disk
        self._requested = self._next
        self._reserve(self._next + block_size)

    def _reserve(self, end: int) -> None:
        with self._lock:
            if end > self._reserved:
                write_offset(self.path, end)
                self._reserved = end

    def allocate(self) -> int:
        if self._next >= self._reserved:  # the next block's reservation has not run yet
            self._reserve(self._next + self.block_size)
        elif self._requested <= self._reserved and self._reserved - self._next <= self.block_size // 2:
            target = self._requested = self._reserved + self.block_size
            submit(self.work, lambda: self._reserve(target))
        producer_id = self._next
        self._next += 1
        return producer_id
