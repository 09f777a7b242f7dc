"""Transaction metadata of one transactional id, as the coordinator logs and replays it.

Each log entry is this metadata as JSON. Transactions V2 (KIP-890 part 2) added two keys, read
with defaults so entries written before them load unchanged: ``client_txn_version`` (the
transaction version of the client requests that last moved the transaction, Kafka's
``clientTransactionVersion``: 2 when they were V2 requests, else 0) and ``next_producer_id``
(the producer id a V2 transaction whose epoch is exhausted moves to when it completes, else -1).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from rivven_kproto.codec.errors import Errors

log = logging.getLogger(__name__)
_string = json.encoder.encode_basestring_ascii  # a JSON string literal, as json.dumps writes it


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_COMPLETED = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})

# Kafka's TransactionState.validPreviousStates: a transition into the key may only leave these.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: _COMPLETED,
    TxnState.ONGOING: _COMPLETED | {TxnState.ONGOING},
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    # Kafka 4.x: a transactions-V2 client may abort with nothing added (from a completed state).
    TxnState.PREPARE_ABORT: _COMPLETED | {TxnState.ONGOING},
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: _COMPLETED,
}


@dataclass(frozen=True)
class TxnMetadata:
    """Immutable: every transition builds a new value, logs it, then installs it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    partitions: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    groups: frozenset[str] = field(default_factory=frozenset)
    start_ms: int = -1
    last_update_ms: int = -1
    client_txn_version: int = 0
    next_producer_id: int = -1

    def evolve(self, **changes: Any) -> TxnMetadata:
        """A copy with ``changes`` (as ``dataclasses.replace``, without its per-call field walk:
        every transition makes one or two of these)."""
        if not changes.keys() <= _FIELD_NAMES:
            raise TypeError(f"unknown TxnMetadata fields {sorted(changes.keys() - _FIELD_NAMES)}")
        copy = object.__new__(TxnMetadata)
        state = copy.__dict__
        state.update(self.__dict__)
        state.update(changes)
        return copy

    def to_json(self) -> dict[str, Any]:
        return {
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "timeout_ms": self.timeout_ms,
            "state": self.state.value,
            "last_producer_id": self.last_producer_id,
            "last_producer_epoch": self.last_producer_epoch,
            "partitions": sorted([t, p] for t, p in self.partitions),
            "groups": sorted(self.groups),
            "start_ms": self.start_ms,
            "last_update_ms": self.last_update_ms,
            "client_txn_version": self.client_txn_version,
            "next_producer_id": self.next_producer_id,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TxnMetadata:
        return cls(
            transactional_id=doc["transactional_id"],
            producer_id=doc["producer_id"],
            producer_epoch=doc["producer_epoch"],
            timeout_ms=doc["timeout_ms"],
            state=TxnState(doc["state"]),
            last_producer_id=doc["last_producer_id"],
            last_producer_epoch=doc["last_producer_epoch"],
            partitions=frozenset((t, p) for t, p in doc["partitions"]),
            groups=frozenset(doc["groups"]),
            start_ms=doc["start_ms"],
            last_update_ms=doc["last_update_ms"],
            client_txn_version=doc.get("client_txn_version", 0),
            next_producer_id=doc.get("next_producer_id", -1),
        )

    @property
    def is_v2(self) -> bool:
        """Moved by transactions-V2 requests: ending it bumps the epoch (KIP-890 part 2)."""
        return self.client_txn_version >= 2


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(TxnMetadata))


# States in which a (V1) EndTxn(abort) finds none of the client's current transaction here.
NOTHING_TO_ABORT = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT})


def abort_of_nothing(txn: TxnMetadata) -> Errors:
    """EndTxn(abort) of a transaction none of whose partitions reached this coordinator.

    librdkafka counts an AddPartitionsToTxn that failed (NOT_COORDINATOR after the coordinator
    moved, a cut connection, CONCURRENT_TRANSACTIONS) as possibly registered and then sends
    EndTxn(abort) for it. Kafka answers INVALID_TXN_STATE from the previous transaction's state,
    fatal to a producer that did nothing wrong. No client aborts a transaction it already asked to
    commit (the commit must be retried), so this abort is of a new, empty transaction: nothing to
    do, NONE; while the previous commit's markers are still being written, CONCURRENT_TRANSACTIONS
    (the client retries until they are).
    """
    if txn.state is TxnState.PREPARE_COMMIT:
        return Errors.CONCURRENT_TRANSACTIONS
    log.info("abort of transactional id %s with nothing registered (state %s): nothing to abort",
             txn.transactional_id, txn.state.value)
    return Errors.NONE


def encode_entry(txn: TxnMetadata) -> bytes:
    """The entry: ``json.dumps(txn.to_json(), separators=(",", ":"))``, byte for byte (a test holds
    them equal), written out directly since each transaction logs three of them."""
    partitions = ",".join(f"[{_string(topic)},{index}]" for topic, index in sorted(txn.partitions))
    groups = ",".join(_string(group) for group in sorted(txn.groups))
    return (
        f'{{"transactional_id":{_string(txn.transactional_id)},"producer_id":{int(txn.producer_id)},'
        f'"producer_epoch":{int(txn.producer_epoch)},"timeout_ms":{int(txn.timeout_ms)},'
        f'"state":{_string(txn.state.value)},"last_producer_id":{int(txn.last_producer_id)},'
        f'"last_producer_epoch":{int(txn.last_producer_epoch)},"partitions":[{partitions}],"groups":[{groups}],'
        f'"start_ms":{int(txn.start_ms)},"last_update_ms":{int(txn.last_update_ms)},'
        f'"client_txn_version":{int(txn.client_txn_version)},"next_producer_id":{int(txn.next_producer_id)}}}'
    ).encode()
