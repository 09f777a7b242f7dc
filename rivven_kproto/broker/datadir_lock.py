"""An exclusive lock on a data directory, held for the broker's lifetime (Kafka's ``.lock`` file).

Two brokers on one directory overwrite each other's acknowledged records. ``flock`` on
``<data-dir>/.lock`` is released by the kernel when the process dies, kill -9 included, so a
stale file never blocks a restart; the holder's pid is written into it for the error message.
``kproto log verify``/``dump`` only read segments and take no lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"


class DataDirLocked(OSError):
    """Another process holds the data directory."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EBUSY, message)
        self.strerror = message


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            who = f"another broker (pid {holder})" if holder.isdigit() else "another process"
            raise DataDirLocked(
                f"{self.path.parent} is in use by {who}: failed to acquire lock on file {self.path}"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock
