"""An fsync split in three so that the slow middle can leave the event loop's thread.

``PartitionLog.begin_flush()`` runs where the log lives and captures what must reach the disk:
duplicated descriptors of the segment and index files written since the last flush, and the log
end offset they cover. ``sync_all()`` may run on any thread: it only fsyncs and closes those
duplicates, so the log can append, roll, retain or close meanwhile (a duplicate keeps even a
deleted file's inode alive). ``PartitionLog.finish_flush()`` then advances the recovery point, back
on the log's thread. Data appended after ``begin_flush()`` may or may not be synced; it is only
counted as durable by a later flush.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rivven_kproto.broker.log import checkpoint

if TYPE_CHECKING:
    from rivven_kproto.broker.log.segment import Segment

logger = logging.getLogger(__name__)


@dataclass
class PendingFlush:
    """What one flush of one partition covers; the descriptors belong to it until ``sync``."""

    end_offset: int
    truncations: int
    descriptors: list[int] = field(default_factory=list)
    directory: Path | None = None
    sealed: list[Segment] = field(default_factory=list)
    synced: bool = False

    def sync(self) -> None:
        """fsync and close the duplicated descriptors (and the directory when entries changed)."""
        try:
            for fd in self.descriptors:
                os.fsync(fd)
            if self.directory is not None:
                try:
                    checkpoint.fsync_dir(self.directory)
                except FileNotFoundError:  # the partition was deleted meanwhile: nothing to keep
                    logger.debug("directory %s vanished before its fsync", self.directory)
            self.synced = True
        finally:
            self.release()

    def release(self) -> None:
        for fd in self.descriptors:
            os.close(fd)
        self.descriptors = []


def sync_all(pending: Iterable[PendingFlush]) -> None:
    """Sync every prepared flush; descriptors are closed even when one fsync fails."""
    pending = list(pending)
    try:
        for flush in pending:
            flush.sync()
    finally:
        for flush in pending:
            flush.release()
