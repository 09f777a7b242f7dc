"""The group coordinator's write-ahead log: one file, compacted by rewriting it as a snapshot.

On disk, in ``<data_dir>/meta/groups/``::

    groups.log       MAGIC, then entries
    groups.log.tmp   a compaction (or creation) in progress; removed when the log opens

``MAGIC`` is the 8 bytes ``b"KPGRPLG1"`` (format version 1). An entry is::

    u32 length | u64 xxh3_64(payload) | payload      (big-endian; length counts the payload only)

and its payload is the records of one coordinator operation (see ``records.py``), so an
operation's records are applied all or not at all. Each append is one ``write`` to an
``O_APPEND`` descriptor before the coordinator changes its state or answers: the data is in the
operating system, so it survives ``kill -9`` of the broker; with ``fsync=True`` (the broker's
``fsync=always``) it is also fsynced first, otherwise :meth:`GroupLog.flush` is called on the
broker's flush interval. A failed write is cut off again (``ftruncate`` to the previous size) so
that no torn bytes stay in front of later entries.

Opening reads the entries in order and stops at the first one that is short, longer than
``MAX_ENTRY`` or fails its checksum; the file is truncated there (and fsynced), so a torn tail is
dropped and everything before it kept. Compaction writes ``MAGIC`` plus entries holding the
current record of every key (a group's records together, in bounded chunks) to
``groups.log.tmp``, fsyncs it and renames it over ``groups.log`` (then fsyncs the directory): a
crash leaves either the old log or the new one.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from pathlib import Path

import xxhash

from ..log.checkpoint import fsync_dir

log = logging.getLogger(__name__)

MAGIC = b"KPGRPLG1"
LOG_NAME = "groups.log"
TMP_SUFFIX = ".tmp"
MAX_ENTRY = 64 * 1024 * 1024
_HEADER = struct.Struct(">IQ")


def frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload), xxhash.xxh3_64_intdigest(payload)) + payload


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class GroupLog:
    """Append-only, checksummed entries with torn-tail truncation and rewrite-compaction."""

    def __init__(self, directory: Path, *, fsync: bool = False) -> None:
        self.directory = directory
        self.path = directory / LOG_NAME
        self.fsync = fsync
        self.size = 0
        self.dirty = False
        self._fd = -1

    def open(self) -> list[bytes]:
        """Open (creating if needed) and return the payloads of every intact entry."""
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + TMP_SUFFIX)
        tmp.unlink(missing_ok=True)
        if not self.path.exists() or self.path.stat().st_size < len(MAGIC):
            self._rewrite(b"")
        data = self.path.read_bytes()
        if data[: len(MAGIC)] != MAGIC:
            raise ValueError(f"{self.path} is not a group coordinator log (bad magic {data[:8]!r})")
        payloads, good = _scan(data)
        if good != len(data):
            log.warning("truncating %s at byte %d of %d (torn or corrupt entry)", self.path, good, len(data))
            with self.path.open("r+b") as f:
                f.truncate(good)
                os.fsync(f.fileno())
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self.size = good
        return payloads

    def append(self, payload: bytes) -> None:
        """Write one entry; raises OSError with the file as it was before the call."""
        if len(payload) > MAX_ENTRY:
            raise ValueError(f"group log entry of {len(payload)} bytes exceeds {MAX_ENTRY}")
        entry = frame(payload)
        try:
            _write_all(self._fd, entry)
            if self.fsync:
                os.fsync(self._fd)
        except OSError:
            try:
                os.ftruncate(self._fd, self.size)
            except OSError:
                log.exception("could not cut a failed write off %s", self.path)
            raise
        self.size += len(entry)
        self.dirty = not self.fsync

    def flush(self) -> None:
        if self.dirty and self._fd >= 0:
            os.fsync(self._fd)
            self.dirty = False

    def compact(self, payloads: Iterable[bytes]) -> None:
        """Replace the whole log by entries holding the current state.

        Raises OSError if the new file cannot be written; the old log then stays in use.
        """
        entries = b"".join(frame(payload) for payload in payloads)
        self._rewrite(entries)
        old, self._fd = self._fd, -1
        if old >= 0:
            os.close(old)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self.size = len(MAGIC) + len(entries)
        self.dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1

    def _rewrite(self, entries: bytes) -> None:
        tmp = self.path.with_name(self.path.name + TMP_SUFFIX)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, MAGIC + entries)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        fsync_dir(self.directory)


def _scan(data: bytes) -> tuple[list[bytes], int]:
    """The intact entries' payloads and the byte position just after the last one."""
    payloads: list[bytes] = []
    pos = len(MAGIC)
    while pos + _HEADER.size <= len(data):
        length, checksum = _HEADER.unpack_from(data, pos)
        end = pos + _HEADER.size + length
        if length > MAX_ENTRY or end > len(data):
            break
        payload = data[pos + _HEADER.size : end]
        if xxhash.xxh3_64_intdigest(payload) != checksum:
            break
        payloads.append(payload)
        pos = end
    return payloads, pos
