"""The transaction coordinator's durable write-ahead log, compacted by snapshots.

Files in ``<data_dir>/meta/txn/``:

``txn.log``
    entries appended one ``write`` each: ``u32 length | u64 xxh64(payload) | payload``, where the
    payload is the JSON of one transactional id's complete metadata after a transition (so replay
    is "last entry per id wins" and an entry may be replayed twice harmlessly). Replay stops at the
    first short or mismatching entry and truncates the file there: a torn write is never applied.
``txn.snapshot``
    ``u64 xxh64(payload) | payload``, the JSON object of every id's metadata, written atomically
    (temp file, fsync, rename). After a snapshot the log is emptied; a crash between the two
    leaves snapshot + old entries, which replay to the same state.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from pathlib import Path
from typing import Any

import xxhash

from ..log.checkpoint import fsync_dir, write_atomic

log = logging.getLogger(__name__)

_ENTRY = struct.Struct(">IQ")
_SUM = struct.Struct(">Q")
MAX_ENTRY = 16 * 1024 * 1024


class WriteAheadLog:
    def __init__(self, directory: Path, *, fsync: bool) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.fsync = fsync
        self.log_path = directory / "txn.log"
        self.snapshot_path = directory / "txn.snapshot"
        self.entries = 0
        self.dirty = False  # appended since the last fsync (only without ``fsync``)
        self._fd = -1
        self._size = 0

    def replay(self) -> dict[str, dict[str, Any]]:
        """The state as of the last good entry; truncates a torn or corrupt tail."""
        state: dict[str, dict[str, Any]] = {}
        if self.snapshot_path.exists():
            data = self.snapshot_path.read_bytes()
            if len(data) >= 8 and _SUM.unpack_from(data)[0] == xxhash.xxh64_intdigest(data[8:]):
                state = json.loads(data[8:])
            else:
                log.error("transaction snapshot %s is corrupt; replaying the log alone", self.snapshot_path)
        good = 0
        if self.log_path.exists():
            data = self.log_path.read_bytes()
            pos = 0
            while pos + _ENTRY.size <= len(data):
                length, checksum = _ENTRY.unpack_from(data, pos)
                end = pos + _ENTRY.size + length
                payload = data[pos + _ENTRY.size : end]
                if length > MAX_ENTRY or end > len(data) or xxhash.xxh64_intdigest(payload) != checksum:
                    break
                entry = json.loads(payload)
                state[entry["transactional_id"]] = entry
                pos = end
                self.entries += 1
            good = pos
            if good != len(data):
                log.warning("truncating the transaction log at byte %d of %d (torn write)", good, len(data))
                with self.log_path.open("r+b") as f:
                    f.truncate(good)
                    os.fsync(f.fileno())
        return state

    def _handle(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._size = os.fstat(self._fd).st_size
        return self._fd

    def append(self, entry: dict[str, Any]) -> None:
        """Record one transition (durably with ``fsync``, else in the OS until ``flush``); raises
        OSError, leaving the caller's state untouched and no partial entry behind."""
        payload = json.dumps(entry, separators=(",", ":")).encode()
        record = _ENTRY.pack(len(payload), xxhash.xxh64_intdigest(payload)) + payload
        fd = self._handle()
        try:
            written = os.write(fd, record)
            if written != len(record):
                raise OSError(f"short write to {self.log_path}: {written} of {len(record)} bytes")
            if self.fsync:
                os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, self._size)  # a later entry must not follow a torn one
            except OSError:
                log.exception("could not cut a failed write off %s", self.log_path)
            raise
        self._size += len(record)
        self.dirty = not self.fsync
        self.entries += 1

    def sync_descriptor(self) -> int | None:
        """A duplicate descriptor to fsync (on any thread) if entries were appended since the
        last sync; they count as synced from now on."""
        if not self.dirty or self._fd < 0:
            return None
        self.dirty = False
        return os.dup(self._fd)

    def flush(self) -> None:
        fd = self.sync_descriptor()
        if fd is not None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        self.flush()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def compact(self, state: dict[str, dict[str, Any]]) -> None:
        """Snapshot the whole state, then start an empty log."""
        payload = json.dumps(state, separators=(",", ":")).encode()
        write_atomic(self.snapshot_path, _SUM.pack(xxhash.xxh64_intdigest(payload)) + payload)
        write_atomic(self.log_path, b"")
        fsync_dir(self.directory)
        if self._fd >= 0:  # the old file was replaced: append to the new one
            os.close(self._fd)
            self._fd = -1
        self.entries = 0
        self.dirty = False
