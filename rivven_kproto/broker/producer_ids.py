"""Producer id allocation: unique for the life of the data directory, never reused after a restart.

Ids are reserved in blocks: ``<data_dir>/meta/producer-ids`` holds (as text) the first id *not*
yet reserved, replaced atomically and fsynced before any id of a new block is handed out. After a
crash the rest of the current block is skipped, so an id is never given twice, and allocating a
producer id costs one fsync per block, not per producer.
"""

from __future__ import annotations

from pathlib import Path

from .log.checkpoint import read_offset, write_offset

BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, meta_dir: Path, block_size: int = BLOCK_SIZE) -> None:
        self.path = meta_dir / "producer-ids"
        self.block_size = block_size
        reserved = read_offset(self.path) or 0
        self._next = reserved
        self._block_end = reserved

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + self.block_size
            write_offset(self.path, self._block_end)
        producer_id = self._next
        self._next += 1
        return producer_id
