"""The share-partition state machine (``broker/share/partition.py``) against a per-offset model.

The implementation keeps ranges (spans) and splits and merges them; the model keeps one entry per
offset and follows KIP-932's rules literally. Hypothesis drives both with the same acquisitions,
acknowledgements, lock expiries, members leaving and crash-restarts (persist and restore), and
compares every offset's state, delivery count and owner after each step.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from rivven_kproto.broker.share import AckType, InvalidRecordState, LogSpan, RecordState, SharePartition

LIMIT = 3  # delivery count limit
LOCK_MS = 100
MAX_LOCKS = 40
MEMBERS = ("a", "b")


@dataclass
class Entry:
    state: RecordState
    count: int
    owner: str | None = None
    deadline: int = 0


class ShareModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sp = SharePartition(0)
        self.model: dict[int, Entry] = {}
        self.start = 0
        self.now = 0

    # -- the model's rules -----------------------------------------------------------------------

    def end(self) -> int:
        return max(self.model, default=self.start - 1) + 1

    def settle(self) -> None:
        while self.start in self.model and self.model[self.start].state in (RecordState.ACKNOWLEDGED,
                                                                            RecordState.ARCHIVED):
            del self.model[self.start]
            self.start += 1

    def release(self, offset: int) -> None:
        entry = self.model[offset]
        state = RecordState.ARCHIVED if entry.count >= LIMIT else RecordState.AVAILABLE
        self.model[offset] = Entry(state, entry.count)

    # -- rules ------------------------------------------------------------------------------------

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 12),
          batches=st.lists(st.tuples(st.integers(1, 6), st.booleans()), min_size=1, max_size=4), exact=st.booleans())
    def acquire(self, member: str, max_records: int, batches: list[tuple[int, bool]], exact: bool) -> None:
        # Available records first (oldest first, exactly up to the budget) ...
        taken = self.sp.acquire_available(member, max_records, self.now, LOCK_MS)
        expected = []
        budget = max_records
        for offset in sorted(self.model):
            if budget == 0:
                break
            entry = self.model[offset]
            if entry.state == RecordState.AVAILABLE:
                self.model[offset] = Entry(RecordState.ACQUIRED, entry.count + 1, member, self.now + LOCK_MS)
                expected.append(offset)
                budget -= 1
        assert sorted(o for a in taken for o in range(a.first, a.last + 1)) == expected
        # ... then whole new batches from the end, while the budget and the lock window allow
        # (``exact``, the record-limit mode: never past the budget, the last batch in part).
        spans, first = [], self.sp.end
        for size, deliverable in batches:
            spans.append(LogSpan(first, first + size - 1, deliverable))
            first += size
        fresh = self.sp.acquire_new(member, spans, budget, MAX_LOCKS, self.now, LOCK_MS, exact)
        fresh_offsets = []
        for span in spans:
            if budget <= 0 or (span.deliverable and MAX_LOCKS - (self.end() - self.start) <= 0):
                break
            last = min(span.last, span.first + budget - 1) if exact and span.deliverable else span.last
            for offset in range(span.first, last + 1):
                if span.deliverable:
                    self.model[offset] = Entry(RecordState.ACQUIRED, 1, member, self.now + LOCK_MS)
                    fresh_offsets.append(offset)
                else:
                    self.model[offset] = Entry(RecordState.ARCHIVED, 0)
            if span.deliverable:
                budget -= last - span.first + 1
        assert [o for a in fresh for o in range(a.first, a.last + 1)] == fresh_offsets
        self.settle()

    @rule(member=st.sampled_from(MEMBERS), data=st.data(),
          ack=st.sampled_from([AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP, AckType.RENEW]))
    def acknowledge(self, member: str, data: st.DataObject, ack: AckType) -> None:
        if not self.model:
            return
        low, high = min(self.model), max(self.model)
        first = data.draw(st.integers(low, high))
        last = data.draw(st.integers(first, min(high, first + 8)))
        valid = all(self.model[o].state == RecordState.ACQUIRED and self.model[o].owner == member
                    for o in range(first, last + 1))
        if not valid:
            before = self.snapshot()
            with pytest.raises(InvalidRecordState):
                self.sp.acknowledge(member, first, last, ack, LIMIT, self.now, LOCK_MS)
            assert self.snapshot() == before  # a refused acknowledgement changes nothing
            return
        self.sp.acknowledge(member, first, last, ack, LIMIT, self.now, LOCK_MS)
        for offset in range(first, last + 1):
            entry = self.model[offset]
            if ack == AckType.ACCEPT:
                self.model[offset] = Entry(RecordState.ACKNOWLEDGED, entry.count)
            elif ack in (AckType.REJECT, AckType.GAP):
                self.model[offset] = Entry(RecordState.ARCHIVED, entry.count)
            elif ack == AckType.RENEW:
                self.model[offset] = Entry(entry.state, entry.count, entry.owner, self.now + LOCK_MS)
            else:
                self.release(offset)
        self.settle()

    @rule(step=st.integers(0, 150))
    def time_passes(self, step: int) -> None:
        self.now += step
        self.sp.expire(self.now, LIMIT)
        for offset, entry in list(self.model.items()):
            if entry.state == RecordState.ACQUIRED and entry.deadline <= self.now:
                self.release(offset)
        self.settle()

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        self.sp.release_member(member, LIMIT)
        for offset, entry in list(self.model.items()):
            if entry.state == RecordState.ACQUIRED and entry.owner == member:
                self.release(offset)
        self.settle()

    @rule()
    def crash_and_restore(self) -> None:
        """Only the persisted form survives: acquired records come back as after a lock expiry
        (available with their count, archived at the limit)."""
        start, batches = self.sp.persisted()
        self.sp = SharePartition.restore(start, batches, LIMIT)
        for offset, entry in list(self.model.items()):
            if entry.state == RecordState.ACQUIRED:
                self.release(offset)
        self.settle()

    # -- the comparison -----------------------------------------------------------------------------

    def snapshot(self) -> dict[int, tuple[RecordState, int, str | None, int]]:
        out = {}
        for span in self.sp.spans:
            for offset in range(span.first, span.last + 1):
                out[offset] = (span.state, span.count, span.owner, span.deadline)
        return out

    @invariant()
    def same_as_model(self) -> None:
        assert self.sp.start == self.start
        assert self.snapshot() == {o: (e.state, e.count, e.owner, e.deadline) for o, e in self.model.items()}
        firsts = [s.first for s in self.sp.spans]
        assert firsts == sorted(firsts)
        for before, after in zip(self.sp.spans, self.sp.spans[1:], strict=False):
            assert before.last + 1 == after.first  # contiguous
            assert not before.same_kind(after)  # merged
        assert all(e.count <= LIMIT for e in self.model.values() if e.state != RecordState.ARCHIVED)


TestSharePartitionModel = ShareModel.TestCase
TestSharePartitionModel.settings = settings(max_examples=150, stateful_step_count=30, deadline=None,
                                            suppress_health_check=[HealthCheck.too_slow])
