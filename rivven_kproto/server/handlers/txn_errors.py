"""Version rules shared by the transaction APIs."""

from __future__ import annotations

from rivven_kproto.codec.errors import Errors


def fenced_for_version(error: Errors, version: int, first_version_with_fenced: int) -> Errors:
    """PRODUCER_FENCED (KIP-588) reaches only clients new enough to know it; older ones get
    INVALID_PRODUCER_EPOCH, as Kafka does."""
    if error == Errors.PRODUCER_FENCED and version < first_version_with_fenced:
        return Errors.INVALID_PRODUCER_EPOCH
    return error


# The first request versions of transactions V2 (KIP-890 part 2): a client sends them only when
# the broker finalized transaction.version 2, and they get V2 semantics only then.
PRODUCE_V2 = 12
TXN_OFFSET_COMMIT_V2 = 5
END_TXN_V2 = 5
# The first versions whose clients know TRANSACTION_ABORTABLE (KIP-890 part 1's follow-up).
PRODUCE_ABORTABLE = 11
TXN_OFFSET_COMMIT_ABORTABLE = 4
TXN_OFFSET_COMMIT_FENCED = 3  # the first TxnOffsetCommit version whose clients know PRODUCER_FENCED (KIP-588)
ADD_PARTITIONS_ABORTABLE = 5


def client_txn_version(ctx_transaction_version: int, version: int, first_v2_version: int) -> int:
    """Kafka's clientTransactionVersion of a request: 2 for a V2 request version on a broker whose
    transaction.version is 2, else 0 (V1 semantics)."""
    return 2 if version >= first_v2_version and ctx_transaction_version >= 2 else 0


def abortable_for_version(error: Errors, version: int, first_version_with_abortable: int) -> Errors:
    """TRANSACTION_ABORTABLE reaches only clients new enough to know it; older ones get
    INVALID_TXN_STATE, as Kafka's AddPartitionsToTxnManager does for them."""
    if error == Errors.TRANSACTION_ABORTABLE and version < first_version_with_abortable:
        return Errors.INVALID_TXN_STATE
    return error


# The transaction coordinator's transient answers to a broker's verification (and not reaching it).
RETRIABLE_VERIFICATION = frozenset({
    Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.CONCURRENT_TRANSACTIONS, Errors.UNKNOWN_SERVER_ERROR,
})


def verified_offsets_error(error: Errors, version: int) -> Errors:
    """A V1 TxnOffsetCommit's verification by the transaction's coordinator on another broker, as
    the client hears it: transient answers retriable (COORDINATOR_NOT_AVAILABLE, as Kafka's group
    coordinator maps a failed verification's NOT_ENOUGH_REPLICAS), a transaction that does not
    hold the group INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4), a fenced producer
    PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v3): what the local verification answers."""
    if error in RETRIABLE_VERIFICATION:
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.TRANSACTION_ABORTABLE, Errors.INVALID_TXN_STATE):
        return abortable_for_version(Errors.TRANSACTION_ABORTABLE, version, TXN_OFFSET_COMMIT_ABORTABLE)
    return fenced_for_version(error, version, TXN_OFFSET_COMMIT_FENCED)
