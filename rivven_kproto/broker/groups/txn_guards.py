"""Verification guards of transactional offsets (Kafka's VerificationGuard for TxnOffsetCommit).

A group coordinator whose transaction's coordinator is another broker asks that broker whether
the producer's transaction holds the group before logging the offsets as pending (KIP-890). The
answer takes a round trip, and the transaction may end meanwhile: its marker lands here first and
the offsets, logged after it, would stay pending with no marker left to resolve them. So a guard
is taken before asking; a marker for the producer ends it; the offsets are logged only if the
guard taken is still the producer's.
"""

from __future__ import annotations


class Guard:
    """A token: identity is all that counts."""

    __slots__ = ()


class TxnOffsetGuards:
    def __init__(self) -> None:
        self._by_producer: dict[int, Guard] = {}

    def start(self, producer_id: int) -> Guard:
        """The producer's current guard, or a new one (requests of one transaction share it)."""
        guard = self._by_producer.get(producer_id)
        if guard is None:
            guard = self._by_producer[producer_id] = Guard()
        return guard

    def holds(self, producer_id: int, guard: Guard) -> bool:
        """No marker for the producer landed since ``guard`` was taken."""
        return self._by_producer.get(producer_id) is guard

    def end(self, producer_id: int) -> None:
        """A marker for the producer landed (or its verification failed): its guards are void."""
        self._by_producer.pop(producer_id, None)

    def __len__(self) -> int:
        return len(self._by_producer)
