"""Blocking file work that state changes produce and the event loop must not wait for.

A state change (a segment roll, retention, DeleteRecords, a coordinator log compaction) changes
memory at once and describes its file work as a job. The server drains the queue on its flusher's
worker thread, in submission order, so a checkpoint is written before the files it makes obsolete
are deleted. Without a queue (offline tools, unit tests) the job runs at once on the caller's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

Job = Callable[[], None]


class BlockingWork:
    """An ordered queue of jobs; ``take`` hands the queued ones to whoever runs them."""

    def __init__(self) -> None:
        self._jobs: list[Job] = []

    def submit(self, job: Job) -> None:
        self._jobs.append(job)

    def take(self) -> list[Job]:
        jobs, self._jobs = self._jobs, []
        return jobs

    def __len__(self) -> int:
        return len(self._jobs)


def submit(work: BlockingWork | None, job: Job) -> None:
    """Queue ``job`` on ``work``, or run it now when there is no queue."""
    if work is None:
        job()
    else:
        work.submit(job)


def run_all(jobs: list[Job]) -> None:
    """Worker thread: run every job in order; a failing job is logged and the others still run."""
    for job in jobs:
        try:
            job()
        except OSError:
            log.exception("blocking file work failed")
