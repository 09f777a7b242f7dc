"""Kafka's read_committed rule on the consumer side, written once for every reader of Fetch data.

A read_committed Fetch returns batches below the last stable offset plus the aborted transactions
overlapping them, as (producer id, first offset). A consumer walks the batches in offset order:
an aborted transaction becomes active once a batch reaches its first offset; from then on that
producer's transactional batches are dropped until its ABORT marker closes it. Control batches
(markers) are never shown, at either isolation level.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol


class BatchInfo(Protocol):
    """What the rule reads of a batch (a ``BatchHeader`` or a decoded ``RecordBatch``)."""

    @property
    def producer_id(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def is_transactional(self) -> bool: ...


class Visibility:
    """Feed every batch of one partition's Fetch data, in order, to :meth:`shows`."""

    def __init__(self, aborted: Iterable[tuple[int, int]] | None, read_committed: bool) -> None:
        self.read_committed = read_committed
        self._pending = sorted(aborted or (), key=lambda entry: entry[1])
        self._next = 0
        self._aborting: set[int] = set()

    def shows(self, batch: BatchInfo, is_abort_marker: Callable[[], bool]) -> bool:
        """Whether the consumer sees this batch's records; ``is_abort_marker`` is asked only for
        the control batches of read_committed reads (it decodes the marker)."""
        if not self.read_committed or batch.producer_id < 0:
            return not batch.is_control
        while self._next < len(self._pending) and self._pending[self._next][1] <= batch.last_offset:
            self._aborting.add(self._pending[self._next][0])
            self._next += 1
        if batch.is_control:
            if is_abort_marker():
                self._aborting.discard(batch.producer_id)
            return False
        return not (batch.is_transactional and batch.producer_id in self._aborting)
