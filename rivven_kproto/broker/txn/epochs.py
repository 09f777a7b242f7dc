"""Producer epochs of a transactional id: the next one handed out, fencing, exhaustion (Kafka's
TransactionCoordinator and TransactionMetadata rules, as pure functions of the metadata).

Transactions V2 (KIP-890 part 2, Kafka 4.0): the handlers pass ``client_txn_version=2`` for the
V2 request versions (Produce v12, TxnOffsetCommit v5, EndTxn v5) when the broker's
``transaction.version`` feature is 2. Such a transaction is started by the first transactional
Produce (the partition leader, this process, adds the partition: ``add_partitions``) and
ended by ``end_txn_v2``, which bumps the epoch in the Prepare entry, so the markers carry the
new epoch and every partition of the transaction fences the old one: a delayed Produce of the
ended transaction can no longer be written into the next one. The new producer id and epoch are
returned to the client; at an exhausted epoch the transaction completes onto a new producer id
with epoch 0 (``next_producer_id``), as Kafka's ``prepareComplete`` does. A V2 transaction
aborted by a timeout or a fencing InitProducerId gets the fencing epoch and then the V2 bump.
"""

from __future__ import annotations

from collections.abc import Callable

from .state import TxnMetadata

INT16_MAX = 0x7FFF
MAX_EPOCH = INT16_MAX - 1  # Short.MAX_VALUE - 1: at this epoch a new producer id is allocated
NO_EPOCH = -1


def next_epoch(
    txn: TxnMetadata, expected: tuple[int, int] | None, allocate_producer_id: Callable[[], int]
) -> TxnMetadata | None:
    """The producer id and epoch a completed transactional id hands out next; None: fenced."""
    if epoch_exhausted(txn.producer_epoch) and (expected is None or expected[1] == txn.producer_epoch):
        return txn.evolve(
            producer_id=allocate_producer_id(), producer_epoch=0, last_producer_id=txn.producer_id,
            last_producer_epoch=txn.producer_epoch if expected is not None else NO_EPOCH,
        )
    if expected is None:  # a new instance
        return txn.evolve(
            producer_epoch=txn.producer_epoch + 1, last_producer_id=txn.producer_id, last_producer_epoch=NO_EPOCH
        )
    if expected[1] == txn.producer_epoch:  # KIP-360: the producer bumps its own epoch
        return txn.evolve(
            producer_epoch=txn.producer_epoch + 1, last_producer_id=txn.producer_id,
            last_producer_epoch=txn.producer_epoch,
        )
    if expected[1] == txn.last_producer_epoch:  # a retry of a bump whose answer was lost
        return txn
    return None


def fenced(txn: TxnMetadata, now_ms: int) -> TxnMetadata:
    """The epoch that aborts a fenced or timed-out transaction: one more, never handed out."""
    epoch = txn.producer_epoch + 1 if txn.producer_epoch < INT16_MAX else txn.producer_epoch
    return txn.evolve(producer_epoch=epoch, last_producer_epoch=NO_EPOCH, last_update_ms=now_ms)


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH


def may_claim(txn: TxnMetadata, expected_pid: int, expected_epoch: int) -> bool:
    """Kafka's isValidProducerId: may a KIP-360 caller with this (producer id, epoch) go on?

    Yes for the current producer id (its epoch is checked when bumping), or for the previous one
    when its epoch was exhausted (a retry of the call that rotated the producer id)."""
    return txn.producer_id == expected_pid or (
        txn.last_producer_id == expected_pid and epoch_exhausted(expected_epoch)
    )
