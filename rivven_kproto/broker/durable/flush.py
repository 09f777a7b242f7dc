"""An fsync split in three so that the slow middle can leave the event loop's thread.

``Partition.begin_flush()`` (or ``DurableLog.begin_sync()``) runs where the log lives and
captures what must reach the disk: duplicated descriptors of the files written since the last
flush, the log end offset they cover and the recovery-point checkpoint to write once they are
synced. ``sync_all()`` may run on any thread: it only fsyncs and closes those duplicates and
writes the checkpoint, so the log can append, roll, retain or close meanwhile (a duplicate keeps
even a deleted file's inode alive). ``Partition.finish_flush()`` then advances the in-memory
recovery point, back on the log's thread. Data appended after ``begin_flush()`` may or may not be
synced; it is only counted as durable by a later flush. A file whose descriptor the log closed
meanwhile (``log/descriptor_cache.py``) is synced by its path instead, and index entries kept in
memory are written by path too (``writes``), before the fsyncs.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rivven_kproto.broker.durable import files as checkpoint


class FileWrite(Protocol):
    """A write a flush makes by path before its fsyncs (an index's new entries)."""

    def apply(self) -> None: ...

    def failed(self) -> None:
        """The flush did not complete: the write is owed again."""
        ...


class FlushItem(Protocol):
    """One log's part of a flush round, whichever engine makes it durable (``PendingFlush``: the
    native log's fsyncs; ``PgCommit``: its rows in the round's database transaction)."""

    kind: str  # what is synced ("segment", or a coordinator log's name), for the metrics
    synced: bool  # made durable by the round
    seconds: float  # how long the round's sync took
    fenced: bool  # refused: another broker claimed the partition (a shared store only)

    def release(self) -> None:
        """Give back what the item holds (descriptors) when it is not synced after all."""
        ...


logger = logging.getLogger(__name__)


@dataclass
class PendingFlush:
    """What one flush of one partition covers; the descriptors belong to it until ``sync``."""

    end_offset: int = 0
    truncations: int = 0
    descriptors: list[int] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)  # files to fsync by name (their descriptor was closed)
    writes: list[FileWrite] = field(default_factory=list)  # written (and fsynced) first
    directory: Path | None = None
    parent: Path | None = None  # the directory holding ``directory``, when its entry is new
    checkpoint: Path | None = None  # where to record ``end_offset`` as the recovery point once synced
    kind: str = "segment"  # what is synced ("segment", or a coordinator log's name), for the metrics
    synced: bool = False
    seconds: float = 0.0  # how long ``sync`` took
    fenced: bool = False  # a directory nobody else writes is never claimed away

    def sync(self) -> None:
        """Make the writes, fsync and close the duplicated descriptors, fsync the named files (and
        the directory when entries changed); a file deleted meanwhile has nothing left to keep."""
        started = time.perf_counter()
        try:
            for write in self.writes:
                write.apply()
            for fd in self.descriptors:
                checkpoint.fsync(fd)
            for path in self.paths:
                checkpoint.fsync_path(path)
            if self.parent is not None:
                checkpoint.fsync_dir(self.parent)
            if self.directory is not None:
                try:
                    checkpoint.fsync_dir(self.directory)
                except FileNotFoundError:  # the partition was deleted meanwhile: nothing to keep
                    logger.debug("directory %s vanished before its fsync", self.directory)
            if self.checkpoint is not None:
                try:
                    checkpoint.write_offset(self.checkpoint, self.end_offset)
                except FileNotFoundError:
                    logger.debug("checkpoint %s vanished with its partition", self.checkpoint)
            self.synced = True
        finally:
            self.seconds = time.perf_counter() - started
            self.release()

    def release(self) -> None:
        for fd in self.descriptors:
            os.close(fd)
        self.descriptors = []


def native_items(items: Iterable[FlushItem]) -> list[PendingFlush]:
    """The round's items as the native log's (a database commit here would be a wiring error)."""
    pending: list[PendingFlush] = []
    for item in items:
        if not isinstance(item, PendingFlush):
            raise TypeError(f"the native log cannot sync {type(item).__name__}")
        pending.append(item)
    return pending


def sync_all(pending: Iterable[PendingFlush]) -> None:
    """Sync every prepared flush, concurrently (a round's fsyncs overlap as the disk allows,
    instead of adding up); descriptors are closed even when one fsync fails."""
    pending = list(pending)
    try:
        if len(pending) == 1:
            pending[0].sync()
            return
        # Many new partitions share one parent directory: fsync it once, first.
        for parent in {flush.parent for flush in pending if flush.parent is not None}:
            checkpoint.fsync_dir(parent)
        for flush in pending:
            flush.parent = None
        futures = [_pool().submit(flush.sync) for flush in pending]
        errors = [future.exception() for future in futures]
        for error in errors:
            if error is not None:
                raise error
    finally:
        for flush in pending:
            flush.release()


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
SYNC_THREADS = 8


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=SYNC_THREADS, thread_name_prefix="kproto-fsync")
        return _POOL
