"""The transactional producer's conversation with its transaction coordinator.

:class:`Transaction` does what Kafka's ``TransactionManager`` does for one transaction:
FindCoordinator (key type 1), InitProducerId with the transactional id (fencing any previous
instance and aborting what it left open), AddPartitionsToTxn before the first write to a
partition, per-partition sequence numbers for the batches, and EndTxn to commit or abort.
:class:`~.producer.Producer` takes one and stamps its batches with the producer id, epoch and
sequences, marked transactional.

Transactions V2 (KIP-890 part 2) are used, as Kafka 4's producer does, when the coordinator's
broker finalized the ``transaction.version`` feature at 2 or more in ApiVersions (checked by
:meth:`init` and at each transaction boundary): no AddPartitionsToTxn (the first Produce v12 to a
partition adds it), EndTxn v5, whose answer carries the bumped epoch (or a new producer id) the
next transaction is written with, its sequences starting again at 0. Otherwise the client stays on
V1 request versions: AddPartitionsToTxn v3 or lower, Produce v11 or lower, EndTxn v4 or lower.

Coordinator errors are handled as the Java client does: NOT_COORDINATOR and
COORDINATOR_NOT_AVAILABLE look the coordinator up again, COORDINATOR_LOAD_IN_PROGRESS and
CONCURRENT_TRANSACTIONS (the previous transaction is still completing) are retried after a short
pause, all within the client's deadline; anything else fails the operation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import trio

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
)
from rivven_kproto.codec.messages.end_txn import EndTxnRequest, EndTxnResponse
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from rivven_kproto.codec.messages.produce import ProduceRequest
from rivven_kproto.codec.schema import Request, Response
from rivven_kproto.net.errors import ClientError, KafkaResponseError

from .client import RETRY_BACKOFF_S, KafkaClient
from .coordinator import KeyType, find_coordinator

R = TypeVar("R", bound=Response)

DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
MAX_SEQUENCE = 0x7FFFFFFF
REFIND = {Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE}
WAIT = {Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.CONCURRENT_TRANSACTIONS}
TRANSACTION_VERSION_FEATURE = "transaction.version"
# The request versions of the two protocols (Kafka's producer caps V1 at these, KIP-890 part 2).
ADD_PARTITIONS_CLIENT_MAX = 3  # v4+ is the broker-to-coordinator form
PRODUCE_V1_MAX, PRODUCE_V2 = 11, 12
END_TXN_V1_MAX, END_TXN_V2 = 4, 5


def first_error(codes: list[int]) -> int:
    """The error that explains a per-partition answer: not OPERATION_NOT_ATTEMPTED if another exists."""
    errors = [c for c in codes if c]
    real = [c for c in errors if c != Errors.OPERATION_NOT_ATTEMPTED]
    return (real or errors or [0])[0]


class Transaction:
    """One transactional id's producer session; :meth:`init` first, then one transaction at a time."""

    def __init__(self, client: KafkaClient, transactional_id: str, timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS) -> None:
        self.client = client
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self.coordinator: int | None = None
        self.partitions: set[tuple[str, int]] = set()
        self._maybe_open = False  # an AddPartitionsToTxn was sent whose answer we may not have seen
        self._sequences: dict[tuple[str, int], int] = {}
        self.v2 = False  # the current transaction uses transactions V2

    @property
    def produce_versions(self) -> tuple[int, int | None]:
        """(min, max) Produce version for this transaction's batches."""
        return (PRODUCE_V2, None) if self.v2 else (0, PRODUCE_V1_MAX)

    async def _call(
        self, request_cls: type[Request], build: Callable[[int], Request], response_cls: type[R], error_of: Callable[[R], int], what: str,
        *, min_version: int = 0, max_version: int | None = None,
    ) -> R:
        """Send to the coordinator, retrying coordinator moves and concurrent-transaction waits."""
        with self.client.deadline(f"{what} for transactional id {self.transactional_id}"):
            while True:
                if self.coordinator is None:
                    self.coordinator = await find_coordinator(self.client, KeyType.TRANSACTION, self.transactional_id)
                response = await self.client.call(
                    request_cls, build, response_cls, node_id=self.coordinator, min_version=min_version, max_version=max_version
                )
                error = Errors.for_code(error_of(response))
                if error in REFIND:
                    self.coordinator = None
                elif error not in WAIT:
                    return response
                await trio.sleep(RETRY_BACKOFF_S)

    async def init(self) -> None:
        """InitProducerId: our producer id and epoch; fences an older instance of the same id."""

        def build(version: int) -> InitProducerIdRequest:
            return InitProducerIdRequest(transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms)

        response = await self._call(InitProducerIdRequest, build, InitProducerIdResponse, lambda r: r.error_code, "InitProducerId")
        if response.error_code:
            raise KafkaResponseError(response.error_code, context=f"InitProducerId for transactional id {self.transactional_id}")
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        self.partitions.clear()
        self._sequences.clear()
        await self._choose_protocol()

    async def _choose_protocol(self) -> None:
        """V2 when the coordinator's broker finalized transaction.version >= 2 and serves its versions."""
        versions = await self.client.versions(self.coordinator)
        self.v2 = (
            versions.feature_level(TRANSACTION_VERSION_FEATURE) >= 2
            and versions.supports(EndTxnRequest, END_TXN_V2)
            and versions.supports(ProduceRequest, PRODUCE_V2)
        )

    async def add_partitions(self, topic: str, partitions: list[int]) -> None:
        """AddPartitionsToTxn for the partitions not yet in the current transaction (V2: none is
        sent, the first Produce to each partition adds it)."""
        new = sorted({p for p in partitions if (topic, p) not in self.partitions})
        if not new:
            return
        self._require_init()
        if self.v2:
            self._maybe_open = True  # from the first Produce on, the coordinator may have them
            self.partitions.update((topic, p) for p in new)
            return

        def build(version: int) -> AddPartitionsToTxnRequest:
            return AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.producer_epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=new)],
            )

        def error_of(response: AddPartitionsToTxnResponse) -> int:
            return first_error(
                [p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition]
            )

        # Interrupted from here on, the coordinator may have the partitions while we never learn it:
        # end() must then still send EndTxn.
        self._maybe_open = True
        response = await self._call(
            AddPartitionsToTxnRequest, build, AddPartitionsToTxnResponse, error_of, "AddPartitionsToTxn",
            max_version=ADD_PARTITIONS_CLIENT_MAX,
        )
        error = error_of(response)
        if error:
            raise KafkaResponseError(error, context=f"adding {topic} {new} to transaction {self.transactional_id}")
        self.partitions.update((topic, p) for p in new)

    def next_sequence(self, topic: str, partition: int, count: int) -> int:
        """The base sequence of the next batch of ``count`` records to ``topic-partition``."""
        base = self._sequences.get((topic, partition), 0)
        self._sequences[(topic, partition)] = (base + count) % (MAX_SEQUENCE + 1)
        return base

    async def end(self, commit: bool) -> bool:
        """EndTxn; False (and no request) when the transaction wrote nothing."""
        if not self.partitions and not self._maybe_open:
            return False
        self._require_init()

        def build(version: int) -> EndTxnRequest:
            return EndTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                committed=commit,
            )

        versions = {"min_version": END_TXN_V2} if self.v2 else {"max_version": END_TXN_V1_MAX}
        response = await self._call(EndTxnRequest, build, EndTxnResponse, lambda r: r.error_code, "EndTxn", **versions)
        if response.error_code:
            verb = "committing" if commit else "aborting"
            raise KafkaResponseError(response.error_code, context=f"{verb} transaction {self.transactional_id}")
        if self.v2:  # KIP-890 part 2: the next transaction is written with the bumped epoch
            self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
            self._sequences.clear()
        self.partitions.clear()
        self._maybe_open = False
        await self._choose_protocol()
        return True

    def _require_init(self) -> None:
        if self.producer_id < 0:
            raise ClientError(Errors.INVALID_TXN_STATE, f"transaction {self.transactional_id} used before InitProducerId")
