"""Blocking file work that state changes produce and the event loop must not wait for.

A state change (a segment roll, retention, DeleteRecords, a coordinator log compaction, a change
of the topic table, ACLs or SCRAM credentials) changes memory at once and describes its file work
as a job. While a server runs the broker, its flusher drains the queue on a worker thread, in
submission order, so a checkpoint is written before the files it makes obsolete are deleted.
Otherwise (offline tools, a broker opened by a test, start-up and shutdown) ``inline`` is set and
a job runs at once on the caller's thread.

A *critical* job records something a client is told is done (a topic created, an ACL removed):
the server answers such a request only after the round that ran it, and a critical job that fails
stops the flusher, and with it the broker, instead of leaving memory and disk disagreeing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from ..file_modes import PRIVATE_FILE_MODE, make_private_dir
from .files import write_atomic

log = logging.getLogger(__name__)

Job = Callable[[], None]


class RetryRound(OSError):
    """The store cannot be reached now: the round's writes and jobs are kept and run again."""


class CriticalWriteFailed(RuntimeError):
    """A critical job failed: memory holds a change the disk does not; the broker must stop."""


class CriticalJob:
    """A job whose failure must not be logged and forgotten."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def __call__(self) -> None:
        self.job()


class BlockingWork:
    """An ordered queue of jobs; ``take`` hands the queued ones to whoever runs them."""

    def __init__(self, *, inline: bool = False) -> None:
        self.inline = inline
        self._jobs: list[Job] = []
        self.critical_submitted = 0  # critical jobs submitted so far
        self.critical_done = 0  # of those, how many a completed round has run

    def submit(self, job: Job, *, critical: bool = False) -> None:
        if self.inline:
            job()
            return
        if critical:
            self.critical_submitted += 1
            job = CriticalJob(job)
        self._jobs.append(job)

    def take(self) -> list[Job]:
        jobs, self._jobs = self._jobs, []
        return jobs

    def requeue(self, jobs: list[Job]) -> None:
        """Jobs taken by a round that could not run them: first in line again."""
        self._jobs[:0] = jobs

    @property
    def critical_pending(self) -> bool:
        return self.critical_done < self.critical_submitted

    def __len__(self) -> int:
        return len(self._jobs)


def submit(work: BlockingWork | None, job: Job, *, critical: bool = False) -> None:
    """Queue ``job`` on ``work``, or run it now when there is no queue."""
    if work is None:
        job()
    else:
        work.submit(job, critical=critical)


def save_metadata(work: BlockingWork | None, path: Path, data: bytes) -> None:
    """Replace a metadata file (topic table, ACLs, SCRAM credentials) with ``data``, as a critical
    job; readable by the broker's user only (see file_modes)."""
    submit(work, lambda: write_atomic(path, data, PRIVATE_FILE_MODE), critical=True)


class Document:
    """One metadata document (the topic table, ACLs, SCRAM credentials): a file in the data
    directory here; another storage engine keeps it elsewhere (a subclass)."""

    def __init__(self, path: Path) -> None:
        self.path = path  # where it lives (for messages)

    def read(self) -> bytes | None:
        return self.path.read_bytes() if self.path.exists() else None

    def save(self, work: BlockingWork | None, data: bytes) -> None:
        """Replace the document, as a critical job of ``work``."""
        make_private_dir(self.path.parent)
        save_metadata(work, self.path, data)


def run_all(jobs: list[Job]) -> None:
    """Worker thread: run every job in order; a failing job is logged and the others still run,
    except a critical one, whose failure is raised (``CriticalWriteFailed``) once the others have run."""
    failed: OSError | None = None
    for job in jobs:
        try:
            job()
        except RetryRound:
            raise
        except OSError as exc:
            log.exception("blocking file work failed")
            if isinstance(job, CriticalJob) and failed is None:
                failed = exc
    if failed is not None:
        raise CriticalWriteFailed(f"a metadata write failed: {failed}") from failed
