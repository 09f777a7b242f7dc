"""The transaction coordinator's state: every transactional id's metadata, and what its clock walks.

Changed only by :meth:`TxnIndex.apply` (the coordinator's one ``apply``, live and at replay).
``txns`` is kept in the order of each id's last transition, so the ids that can have expired are
found from the oldest on, and ``in_flight`` holds the Ongoing and prepared ones, the only ones a
timeout or a marker retry can concern: the coordinator's periodic scan (``due``) walks these, not
every id it ever saw.
"""

from __future__ import annotations

from .state import TxnMetadata, TxnState


class TxnIndex:
    def __init__(self) -> None:
        self.txns: dict[str, TxnMetadata] = {}  # in the order of their last transition
        self.by_producer: dict[int, str] = {}
        self.in_flight: dict[str, TxnMetadata] = {}  # Ongoing or prepared

    def apply(self, txn: TxnMetadata) -> None:
        """One transition: logged just now, or replayed (in log order, hence time order)."""
        transactional_id = txn.transactional_id
        previous = self.txns.pop(transactional_id, None)  # put back last: the order of transitions
        self.in_flight.pop(transactional_id, None)
        if txn.state is TxnState.DEAD:
            self.by_producer.pop(txn.producer_id, None)
            return
        if previous is not None and previous.producer_id != txn.producer_id:
            self.by_producer.pop(previous.producer_id, None)  # rotated after epoch exhaustion
        self.txns[transactional_id] = txn
        self.by_producer[txn.producer_id] = transactional_id
        if not txn.state.is_complete:
            self.in_flight[transactional_id] = txn

    def expired(self, now_ms: int, expiration_ms: int) -> list[TxnMetadata]:
        """Idle ids whose last transition is over ``expiration_ms`` old: from the oldest on, up to
        the first idle one that is not (in-flight ones never expire, and are skipped)."""
        expired = []
        for txn in self.txns.values():
            if not txn.state.is_complete:
                continue
            if now_ms - txn.last_update_ms <= expiration_ms:
                break
            expired.append(txn)
        return expired
