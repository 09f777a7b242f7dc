"""The coordinators' write-ahead log: checksummed entries in numbered files, compacted by snapshots.

On disk, in the coordinator's directory (``<data_dir>/meta/txn/``, ``<data_dir>/meta/groups/``)::

    <name>-<seq>.log        MAGIC, then entries appended since snapshot <seq> (or since the start)
    <name>-<seq>.snapshot   MAGIC, then entries holding the whole state as of the roll to <seq>
    *.tmp                   a snapshot being written; removed when the log opens

``<seq>`` is ten decimal digits. ``MAGIC`` is the 8 bytes ``b"KPDLOG01"``. An entry is::

    u32 length | u64 xxh3_64(payload) | payload      (big-endian; length counts the payload only)

A payload is opaque here: one coordinator operation's records, applied all or not at all. Each
append is one ``write`` to an ``O_APPEND`` descriptor before the coordinator changes its state
or answers, so it survives ``kill -9`` of the broker; the server's flusher fsyncs it on a worker
thread (``begin_sync``), and with ``fsync=always`` answers only after that. A failed write is cut
off again (``ftruncate`` to the previous size), so no torn bytes stay in front of later entries.

Compaction never stops appends: ``roll`` starts file ``<seq+1>`` at once and returns a job that
writes the snapshot (temp file, fsync, rename, directory fsync) and only then deletes the files
below ``<seq+1>``. Replay reads the newest snapshot ``<k>`` and then every log from ``<k>`` on,
so a crash at any point replays to the same state. Reading stops at the first entry that is
short, longer than ``MAX_ENTRY`` or fails its checksum; the newest log is truncated there (a torn
tail), an older one ends the replay with an error logged.

The group coordinator's earlier single file ``groups.log`` (magic ``KPGRPLG1``, same entries)
is adopted as ``groups-0000000000.log`` when found.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Iterable
from pathlib import Path

import xxhash

from .files import TMP_SUFFIX, fsync, fsync_dir, write_atomic
from .flush import FlushItem, PendingFlush, native_items
from .work import BlockingWork, Job, submit

log = logging.getLogger(__name__)

MAGIC = b"KPDLOG01"
LEGACY_GROUPS_MAGIC = b"KPGRPLG1"
MAX_ENTRY = 64 * 1024 * 1024
_HEADER = struct.Struct(">IQ")
_FILE = re.compile(r"^(?P<name>.+)-(?P<seq>\d{10})\.(?P<kind>log|snapshot)$")


def frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload), xxhash.xxh3_64_intdigest(payload)) + payload


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _magic(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(len(MAGIC))


def scan(data: bytes, magics: tuple[bytes, ...] = (MAGIC,)) -> tuple[list[bytes], int]:
    """The intact entries' payloads and the byte position just after the last one."""
    if data[: len(MAGIC)] not in magics:
        raise ValueError(f"not a rivven_kproto durable log (magic {data[:8]!r})")
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


class DurableLog:
    """Append-only, checksummed entries with torn-tail truncation and snapshot compaction."""

    def __init__(self, directory: Path, name: str, work: BlockingWork | None = None) -> None:
        self.directory = directory
        self.name = name
        self.work = work
        self.size = 0  # bytes of the current log file
        self.appended = 0  # entries appended since open (the server compares counts)
        self.snapshot_size = 0  # bytes of the newest snapshot, when one is read or written
        self._seq = 0
        self._fd = -1
        self._dirty = False  # appended since the last begin_sync
        self._dir_dirty = False  # a file was created since the last begin_sync
        self._retired: list[int] = []  # descriptors of rolled files still owed an fsync

    def path(self, seq: int, kind: str) -> Path:
        return self.directory / f"{self.name}-{seq:010d}.{kind}"

    @property
    def current_path(self) -> Path:
        """The file appends go to now."""
        return self.path(self._seq, "log")

    # -- opening --------------------------------------------------------------------------------

    def preload(self) -> None:
        """Nothing to read ahead: this log is opened once, at start (the PostgreSQL one reads a
        shard taken over on a worker thread)."""

    def open(self) -> list[bytes]:
        """Open (creating if needed) and return every intact payload, the snapshot's first."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for stray in self.directory.glob(f"{self.name}-*{TMP_SUFFIX}"):
            stray.unlink()
        self._adopt_legacy_groups_log()
        logs, snapshots = self._files()
        base = max(snapshots, default=None)
        payloads: list[bytes] = []
        if base is not None:
            data = self.path(base, "snapshot").read_bytes()
            try:
                payloads, good = scan(data)
            except ValueError:
                payloads, good = [], 0
            self.snapshot_size = len(data)
            if good != len(data):
                log.error("snapshot %s is damaged at byte %d; its later entries are lost",
                          self.path(base, "snapshot"), good)
        replayed = sorted(seq for seq in logs if base is None or seq >= base)
        for index, seq in enumerate(replayed):
            path = self.path(seq, "log")
            data = path.read_bytes()
            entries, good = scan(data, (MAGIC, LEGACY_GROUPS_MAGIC)) if len(data) >= len(MAGIC) else ([], 0)
            payloads.extend(entries)
            if good != len(data):
                newest = index == len(replayed) - 1
                (log.warning if newest else log.error)(
                    "truncating %s at byte %d of %d (torn or corrupt entry)", path, good, len(data))
                self._truncate(path, good)
                if not newest:
                    for later in replayed[index + 1 :]:
                        self.path(later, "log").rename(self.path(later, "log").with_suffix(".log.damaged"))
                    replayed = replayed[: index + 1]
                    break
        for seq in logs:
            if base is not None and seq < base:
                self.path(seq, "log").unlink()
        for seq in snapshots:
            if seq != base:
                self.path(seq, "snapshot").unlink()
        self._seq = max(replayed, default=base if base is not None else 0)
        self._open_current(create=not replayed)
        return payloads

    def _files(self) -> tuple[list[int], list[int]]:
        logs: list[int] = []
        snapshots: list[int] = []
        for path in self.directory.iterdir():
            match = _FILE.match(path.name)
            if match and match["name"] == self.name:
                (logs if match["kind"] == "log" else snapshots).append(int(match["seq"]))
        return logs, snapshots

    def _adopt_legacy_groups_log(self) -> None:
        legacy = self.directory / f"{self.name}.log"
        if legacy.exists() and not self._files()[0] and _magic(legacy) == LEGACY_GROUPS_MAGIC:
            os.replace(legacy, self.path(0, "log"))
            fsync_dir(self.directory)

    def _truncate(self, path: Path, size: int) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            if size < len(MAGIC):
                os.ftruncate(fd, 0)
                _write_all(fd, MAGIC)
            else:
                os.ftruncate(fd, size)
            fsync(fd)
        finally:
            os.close(fd)

    def _open_current(self, *, create: bool) -> None:
        path = self.path(self._seq, "log")
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        if create or self.size == 0:
            _write_all(self._fd, MAGIC)
            self.size = len(MAGIC)
            self._dir_dirty = True
            self._dirty = True

    # -- appending -----------------------------------------------------------------------------

    def record_decision(self, producer_id: int, epoch: int | None) -> None:
        """A commit decision for other leaders to read (PostgreSQL's log keeps one): one process
        writes every marker of the native log, so nothing needs it here."""

    def append(self, payload: bytes) -> None:
        """Write one entry; raises OSError (or ValueError when too large) with the file unchanged."""
        if len(payload) > MAX_ENTRY:
            raise ValueError(f"log entry of {len(payload)} bytes exceeds {MAX_ENTRY}")
        entry = frame(payload)
        try:
            _write_all(self._fd, entry)
        except OSError:
            try:
                os.ftruncate(self._fd, self.size)
            except OSError:
                log.exception("could not cut a failed write off %s", self.path(self._seq, "log"))
            raise
        self.size += len(entry)
        self.appended += 1
        self._dirty = True

    def begin_sync(self) -> PendingFlush | None:
        """What an fsync must cover now (duplicated descriptors), or None when nothing changed."""
        if not (self._dirty or self._dir_dirty or self._retired) or self._fd < 0:
            return None
        current = [os.dup(self._fd)] if self._dirty else []
        pending = PendingFlush(descriptors=[*self._retired, *current], kind=self.name)
        self._retired = []
        if self._dir_dirty:
            pending.directory = self.directory
        self._dirty = self._dir_dirty = False
        return pending

    def abandon_sync(self, item: FlushItem) -> None:
        """A captured sync that could not run: its descriptors wait for the next one."""
        (pending,) = native_items([item])
        self._retired.extend(pending.descriptors)
        pending.descriptors = []
        self._dirty = True
        self._dir_dirty = self._dir_dirty or pending.directory is not None

    # -- compaction ----------------------------------------------------------------------------

    def roll(self, snapshot: Iterable[bytes], *, now: bool = False) -> None:
        """Start the next file now; write ``snapshot`` (the whole state as of now) off the loop,
        or at once with ``now`` (at load, before anything is served)."""
        entries = MAGIC + b"".join(frame(payload) for payload in snapshot)
        old_fd, old_dirty = self._fd, self._dirty
        self._seq += 1
        self._open_current(create=True)
        if old_dirty:
            self._retired.append(os.dup(old_fd))
        os.close(old_fd)
        self.snapshot_size = len(entries)
        submit(None if now else self.work, self._snapshot_job(self._seq, entries))

    def _snapshot_job(self, seq: int, entries: bytes) -> Job:
        def write_snapshot_then_forget_older() -> None:
            write_atomic(self.path(seq, "snapshot"), entries)
            logs, snapshots = self._files()
            for older in logs:
                if older < seq:
                    self.path(older, "log").unlink(missing_ok=True)
            for older in snapshots:
                if older < seq:
                    self.path(older, "snapshot").unlink(missing_ok=True)
            fsync_dir(self.directory)

        return write_snapshot_then_forget_older

    def close(self) -> None:
        """fsync what is left and close (at shutdown, on whichever thread closes the broker)."""
        pending = self.begin_sync()
        if pending is not None:
            pending.sync()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
