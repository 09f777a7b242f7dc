"""Crash-safe small files: offset checkpoints, the shutdown marker, metadata tables; every fsync.

Offset checkpoint format (``recovery-point``, ``log-start-offset``), ASCII text::

    0\\n          format version
    <offset>\\n   decimal int64

A checkpoint is replaced atomically: written to ``<name>.tmp``, fsynced, renamed over the old file,
then the directory is fsynced, so a crash leaves either the old or the new value, never half of
one. A stray ``.tmp`` left by a crash is removed when the log opens. A file that cannot be parsed is
treated as absent (the log then falls back to its safe default) and logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

CHECKPOINT_VERSION = 0
TMP_SUFFIX = ".tmp"


def fsync(fd: int) -> None:
    """The broker's only call of ``os.fsync``: one place to find, count and test every sync."""
    os.fsync(fd)


def fsync_path(path: Path) -> None:
    """fsync a file by name (written through a descriptor since closed); a deleted file is skipped."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        logger.debug("%s vanished before its fsync", path)
        return
    try:
        fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make renames, creations and unlinks inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` so that a crash shows the old or the new content only; the
    file gets ``mode`` (under the umask) whatever the old one had."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a leftover of a crash keeps its mode through O_CREAT: start afresh
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_offset(path: Path, offset: int) -> None:
    write_atomic(path, f"{CHECKPOINT_VERSION}\n{offset}\n".encode("ascii"))


def read_offset(path: Path) -> int | None:
    """The checkpointed offset, or None when the file is missing or unreadable."""
    try:
        text = path.read_bytes().decode("ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        logger.warning("ignoring unreadable checkpoint %s: %s", path, exc)
        return None
    lines = text.split("\n")
    if len(lines) != 3 or lines[0] != str(CHECKPOINT_VERSION) or lines[2] != "":
        logger.warning("ignoring malformed checkpoint %s", path)
        return None
    try:
        offset = int(lines[1], 10)
    except ValueError:
        logger.warning("ignoring malformed checkpoint %s", path)
        return None
    if offset < 0:
        logger.warning("ignoring negative checkpoint %s", path)
        return None
    return offset


def write_marker(path: Path) -> None:
    """Create an empty marker file durably (the clean-shutdown marker)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def remove_marker(path: Path) -> bool:
    """Remove a marker durably; returns whether it was there."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True
