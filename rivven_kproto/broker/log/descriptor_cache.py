"""Segment log files share a bounded set of open descriptors, least recently used closed first.

A partition holds no descriptor of its own: each segment's ``.log`` file is opened when it is
appended to or read, and stays open while it is among the ``capacity`` most recently used files of
the process, so a topic of 10,000 idle partitions costs no more descriptors than one of 100 (the
indexes are in memory, see ``index.py``). Busy partitions stay in the cache: their appends and
reads pay one ``move_to_end``; an idle one pays one ``open`` when it is used again.

Closing a file that has writes not yet fsynced is safe because the durability layer syncs by
name what it cannot sync by descriptor: ``Segment.capture_sync`` hands the flush a duplicate of an
open descriptor, or the file's path when the cache closed it (the flusher opens, fsyncs and closes
it on a worker thread; Linux writes back every dirty page of the file, whichever descriptor wrote
it). Appends and reads use it on the log's thread only (the event loop, or whoever opens a
broker); worker threads only ever get duplicates. Opening and closing take a lock, so partitions
may close on several threads at once (shutdown), which opens nothing.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

from rivven_kproto.broker.descriptors import log_file_budget

logger = logging.getLogger(__name__)

MIN_CAPACITY = 4  # a read spanning segments keeps the one it reads among the most recent
SHORTAGE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})


def _open_file(path: Path, create: bool) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT if create else os.O_RDWR, 0o644)


class LogFile:
    """One segment's ``.log`` file: its descriptor when open, else the path to open it by."""

    __slots__ = ("path", "fd", "_cache")

    def __init__(self, path: Path, cache: DescriptorCache) -> None:
        self.path = path
        self.fd = -1
        self._cache = cache

    def create(self) -> int:
        """Open the file, creating it if missing (a new or loaded segment)."""
        return self._cache.open(self, create=True)

    def descriptor(self) -> int:
        """The open descriptor, reopening the file if the cache closed it (never recreating it)."""
        fd = self.fd
        if fd >= 0:
            self._cache.touch(self)
            return fd
        return self._cache.open(self, create=False)

    def close(self) -> None:
        self._cache.close(self)


class DescriptorCache:
    """At most ``capacity`` open log files; opening one more closes the least recently used."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(MIN_CAPACITY, capacity)
        self._open: OrderedDict[LogFile, None] = OrderedDict()
        self._lock = threading.Lock()
        self.opens = 0  # files opened so far (new and reopened), for tests and metrics
        self.evictions = 0  # files closed to make room

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, file: LogFile) -> bool:
        return file in self._open

    def touch(self, file: LogFile) -> None:
        self._open.move_to_end(file)

    def open(self, file: LogFile, *, create: bool) -> int:
        with self._lock:
            return self._open_locked(file, create)

    def _open_locked(self, file: LogFile, create: bool) -> int:
        if file.fd >= 0:
            self.touch(file)
            return file.fd
        try:
            fd = _open_file(file.path, create)
        except OSError as exc:
            # Out of descriptors (sockets, flushes): give back a quarter of the cache and retry once.
            if exc.errno not in SHORTAGE_ERRNOS or not self._open:
                raise
            logger.warning("out of descriptors opening %s: closing %d cached log files", file.path,
                           max(1, len(self._open) // 4))
            self._evict(len(self._open) - max(1, len(self._open) // 4))
            fd = _open_file(file.path, create)
        file.fd = fd
        self._open[file] = None
        self.opens += 1
        if len(self._open) > self.capacity:
            self._evict(self.capacity)
        return fd

    def _evict(self, keep: int) -> None:
        while len(self._open) > keep:
            victim, _ = self._open.popitem(last=False)
            fd, victim.fd = victim.fd, -1
            self.evictions += 1
            os.close(fd)

    def close(self, file: LogFile) -> None:
        with self._lock:
            if file.fd >= 0:
                self._open.pop(file, None)
                fd, file.fd = file.fd, -1
                os.close(fd)


_SHARED: DescriptorCache | None = None


def shared_cache() -> DescriptorCache:
    """The process's cache (the open-files limit is per process), sized when first used."""
    global _SHARED
    if _SHARED is None:
        _SHARED = DescriptorCache(log_file_budget())
    return _SHARED
