"""One share-partition's delivery state (KIP-932's SharePartition), as ranges of offsets.

Offsets below ``start`` are done (acknowledged or archived). From ``start`` to ``end`` the
in-flight records are held as contiguous, non-overlapping :class:`Span` s, each a range of
offsets in one state with one delivery count (and, while acquired, one owner and lock deadline),
so acquiring a 500-record batch or accepting it is one span, not 500 entries. Acknowledgements
may split spans; :meth:`SharePartition.normalize` merges equal neighbours again and moves
``start`` past the finished ones.

States and transitions (Kafka's RecordState):

* Available -> Acquired (delivery count + 1) by :meth:`acquire_available` / :meth:`acquire_new`;
* Acquired -> Acknowledged (ACCEPT, and GAP for offsets without a record), -> Archived (REJECT),
  -> Available (RELEASE, lock expiry, owner left) unless the delivery count reached the limit,
  then -> Archived;
* records the log never lets a consumer see (aborted transactions and control batches at
  read_committed, control batches always) go straight to Archived when they are reached.

The persisted form (:meth:`persisted`) has no owners or deadlines: an acquired span is written as
Available with its delivery count, so after a crash it is delivered again and never lost, while
acknowledged ones are never delivered again. Pure: time is an argument.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace


class RecordState(enum.IntEnum):
    """Kafka's values (ReadShareGroupState's DeliveryState uses them)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge AcknowledgeTypes."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class InvalidRecordState(Exception):
    """An acknowledgement names offsets this member has not acquired (INVALID_RECORD_STATE)."""


@dataclass(frozen=True)
class Span:
    first: int
    last: int  # inclusive
    state: RecordState
    count: int  # delivery count
    owner: str | None = None  # the member holding the lock, while Acquired
    deadline: int = 0  # the lock's expiry (ms), while Acquired

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def same_kind(self, other: Span) -> bool:
        return (self.state, self.count, self.owner, self.deadline) == (other.state, other.count, other.owner,
                                                                        other.deadline)


@dataclass(frozen=True)
class Acquired:
    """A range handed to a consumer (ShareFetch's AcquiredRecords)."""

    first: int
    last: int
    count: int


@dataclass(frozen=True)
class LogSpan:
    """A batch of the log as acquisition sees it: deliverable, or to be archived unseen."""

    first: int
    last: int
    deliverable: bool


class SharePartition:
    def __init__(self, start: int, spans: Iterable[Span] = ()) -> None:
        self.start = start
        self.spans: list[Span] = list(spans)
        self.normalize()

    # -- views ----------------------------------------------------------------------------------

    @property
    def end(self) -> int:
        """The next offset never acquired."""
        return self.spans[-1].last + 1 if self.spans else self.start

    def in_flight(self) -> int:
        return self.end - self.start

    def completed(self) -> int:
        """In-flight records already acknowledged or archived (not part of the lag)."""
        return sum(s.size for s in self.spans if s.state in TERMINAL)

    def acquired_by(self, member: str) -> int:
        return sum(s.size for s in self.spans if s.state == RecordState.ACQUIRED and s.owner == member)

    def next_deadline(self) -> int | None:
        deadlines = [s.deadline for s in self.spans if s.state == RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def copy(self) -> SharePartition:
        clone = SharePartition.__new__(SharePartition)
        clone.start, clone.spans = self.start, list(self.spans)
        return clone

    def persisted(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """(start, [(first, last, state, delivery count)]) with Acquired written as Available."""
        batches: list[tuple[int, int, int, int]] = []
        for span in self.spans:
            state = RecordState.AVAILABLE if span.state == RecordState.ACQUIRED else span.state
            if batches and batches[-1][2] == state and batches[-1][3] == span.count and batches[-1][1] + 1 == span.first:
                batches[-1] = (batches[-1][0], span.last, int(state), span.count)
            else:
                batches.append((span.first, span.last, int(state), span.count))
        return self.start, batches

    @classmethod
    def restore(cls, start: int, batches: Sequence[Sequence[int]], limit: int) -> SharePartition:
        """The persisted form read back; an available record that reached the delivery count
        limit (it was acquired a last time when the broker stopped) is archived, as a lock
        expiry would have done."""
        def span(first: int, last: int, state: int, count: int) -> Span:
            archived = state == RecordState.AVAILABLE and count >= limit
            return Span(first, last, RecordState.ARCHIVED if archived else RecordState(state), count)

        return cls(start, (span(*b) for b in batches))

    # -- structure ------------------------------------------------------------------------------

    def normalize(self) -> None:
        """Merge equal neighbours; drop finished spans at the front and move ``start`` past them."""
        merged: list[Span] = []
        for span in self.spans:
            if merged and merged[-1].same_kind(span) and merged[-1].last + 1 == span.first:
                merged[-1] = replace(merged[-1], last=span.last)
            else:
                merged.append(span)
        cut = 0
        while cut < len(merged) and merged[cut].state in TERMINAL:
            self.start = merged[cut].last + 1
            cut += 1
        self.spans = merged[cut:]

    def _split_at(self, offset: int) -> None:
        """Make ``offset`` the first offset of a span (when a span covers it)."""
        i = bisect.bisect_right(self.spans, offset, key=lambda s: s.first) - 1
        if i < 0:
            return
        span = self.spans[i]
        if span.first < offset <= span.last:
            self.spans[i : i + 1] = [replace(span, last=offset - 1), replace(span, first=offset)]

    def _range(self, first: int, last: int) -> tuple[int, int]:
        """Indexes [lo, hi) of the spans exactly covering [first, last] after splitting."""
        self._split_at(first)
        self._split_at(last + 1)
        keys = [s.first for s in self.spans]
        return bisect.bisect_left(keys, first), bisect.bisect_right(keys, last)

    # -- acquisition ----------------------------------------------------------------------------

    def acquire_available(self, member: str, max_records: int, now_ms: int, lock_ms: int) -> list[Acquired]:
        """Take Available spans (released or expired records) for ``member``, oldest first."""
        taken: list[Acquired] = []
        budget = max_records
        for i, span in enumerate(self.spans):
            if budget <= 0:
                break
            if span.state != RecordState.AVAILABLE:
                continue
            if span.size > budget:
                self._split_at(span.first + budget)
                span = self.spans[i]
            self.spans[i] = replace(span, state=RecordState.ACQUIRED, count=span.count + 1, owner=member,
                                    deadline=now_ms + lock_ms)
            taken.append(Acquired(span.first, span.last, span.count + 1))
            budget -= span.size
        self.normalize()
        return taken

    def room(self, max_locks: int) -> int:
        """How many new offsets may be acquired before the in-flight window is full."""
        return max(max_locks - self.in_flight(), 0)

    def acquire_new(self, member: str, batches: Iterable[LogSpan], max_records: int, max_locks: int,
                    now_ms: int, lock_ms: int, exact: bool = False) -> list[Acquired]:
        """Acquire whole batches from ``end`` on (batches end where the log's visible end is)
        while fewer than ``max_records`` were taken and the window has room; batches nobody may
        see are archived as they are passed. ``exact`` (ShareFetch v2's record-limit acquire mode,
        KIP-1206): never more than ``max_records``, the last batch taken in part; the rest of it
        is acquired from ``end`` next time."""
        taken: list[Acquired] = []
        budget = max_records
        for batch in batches:
            first = max(batch.first, self.end)
            if batch.last < first:
                continue
            if budget <= 0 or (batch.deliverable and self.room(max_locks) <= 0):
                break
            if first > self.end:  # offsets the log no longer has (compaction, deleted records)
                self.spans.append(Span(self.end, first - 1, RecordState.ARCHIVED, 0))
            if batch.deliverable:
                last = min(batch.last, first + budget - 1) if exact else batch.last
                self.spans.append(Span(first, last, RecordState.ACQUIRED, 1, member, now_ms + lock_ms))
                taken.append(Acquired(first, last, 1))
                budget -= last - first + 1
            else:
                self.spans.append(Span(first, batch.last, RecordState.ARCHIVED, 0))
        self.normalize()
        return taken

    # -- acknowledgement and release ----------------------------------------------------------

    def check_acknowledge(self, member: str, first: int, last: int) -> None:
        """Raise InvalidRecordState unless every offset in [first, last] is acquired by ``member``."""
        if first > last or first < self.start or last >= self.end:
            raise InvalidRecordState(f"offsets {first}-{last} are not in flight ({self.start}-{self.end - 1})")
        keys = [s.first for s in self.spans]
        i = bisect.bisect_right(keys, first) - 1
        offset = first
        while offset <= last:
            span = self.spans[i]
            if span.state != RecordState.ACQUIRED or span.owner != member:
                raise InvalidRecordState(f"offset {offset} is {span.state.name.lower()}, not acquired by this member")
            offset = span.last + 1
            i += 1

    def acknowledge(self, member: str, first: int, last: int, ack: AckType, limit: int, now_ms: int,
                    lock_ms: int) -> int:
        """Apply one acknowledgement type to [first, last] (checked with ``check_acknowledge``);
        the records archived (rejected, or released at the delivery-count limit)."""
        self.check_acknowledge(member, first, last)
        lo, hi = self._range(first, last)
        archived = 0
        for i in range(lo, hi):
            span = self.spans[i]
            if ack == AckType.RENEW:
                self.spans[i] = replace(span, deadline=now_ms + lock_ms)
            elif ack in (AckType.ACCEPT, AckType.GAP):
                state = RecordState.ACKNOWLEDGED if ack == AckType.ACCEPT else RecordState.ARCHIVED
                self.spans[i] = Span(span.first, span.last, state, span.count)
            elif ack == AckType.REJECT:
                self.spans[i] = Span(span.first, span.last, RecordState.ARCHIVED, span.count)
                archived += span.size
            else:
                self.spans[i] = _released(span, limit)
                archived += span.size if self.spans[i].state == RecordState.ARCHIVED else 0
        self.normalize()
        return archived

    def expire(self, now_ms: int, limit: int) -> tuple[int, int]:
        """Locks past their deadline: release those records. (records released, of them archived)."""
        return self._release(lambda span: span.deadline <= now_ms, limit)

    def release_member(self, member: str, limit: int) -> tuple[int, int]:
        """The member left (or its share session closed): its acquired records are available
        again. (records released, of them archived)."""
        return self._release(lambda span: span.owner == member, limit)

    def _release(self, which: Callable[[Span], bool], limit: int) -> tuple[int, int]:
        released = archived = 0
        for i, span in enumerate(self.spans):
            if span.state == RecordState.ACQUIRED and which(span):
                self.spans[i] = _released(span, limit)
                released += span.size
                archived += span.size if self.spans[i].state == RecordState.ARCHIVED else 0
        if released:
            self.normalize()
        return released, archived


def _released(span: Span, limit: int) -> Span:
    state = RecordState.ARCHIVED if span.count >= limit else RecordState.AVAILABLE
    return Span(span.first, span.last, state, span.count)
