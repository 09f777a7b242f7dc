"""Transaction admin (KIP-664): list, describe, active producers, abort, and hanging transactions.

ListTransactions goes to every broker (each lists the transactional ids it coordinates),
DescribeTransactions to each id's coordinator, DescribeProducers and WriteTxnMarkers to the
partition leader. A *hanging* transaction is an open transaction on a partition (DescribeProducers
reports its start offset) that no coordinator will ever complete: the producer id maps to no
transactional id, or that id's transaction is no longer Ongoing, has another epoch, or does not
include the partition. Left alone it pins the partition's last stable offset forever, so
read_committed consumers stop there; aborting it (a WriteTxnMarkers ABORT with the producer's
epoch, sent to the leader) releases them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    TopicRequest,
)
from rivven_kproto.codec.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from rivven_kproto.codec.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from rivven_kproto.codec.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from rivven_kproto.net.errors import ClientError, KafkaResponseError, UnsupportedApiError, check

from .client import KafkaClient
from .coordinator import KeyType, find_coordinator

ONGOING = "Ongoing"
# Kafka's TransactionState names, as ListTransactions filters take them.
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence")


@dataclass
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int | None
    partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class ActiveProducer:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int | None


@dataclass
class OpenTransaction:
    """An open transaction on one partition, with the verdict of the coordinator check."""

    topic: str
    partition: int
    producer: ActiveProducer
    age_ms: int
    hanging: bool
    reason: str
    transactional_id: str | None = None


async def list_transactions(
    client: KafkaClient,
    states: list[str] | None = None,
    producer_ids: list[int] | None = None,
    min_duration_ms: int | None = None,
) -> list[ListedTransaction]:
    """Every broker's transactions matching all filters (empty filters match everything)."""

    def build(version: int) -> ListTransactionsRequest:
        return ListTransactionsRequest(
            state_filters=list(states or []),
            producer_id_filters=list(producer_ids or []),
            duration_filter=-1 if min_duration_ms is None else min_duration_ms,
        )

    metadata = await client.metadata([])
    listed = []
    for node in sorted(metadata.brokers):
        response = await client.call(
            ListTransactionsRequest, build, ListTransactionsResponse, node_id=node,
            min_version=0 if min_duration_ms is None else 1,
        )
        check(response.error_code, context=f"ListTransactions on broker {node}")
        listed += [
            ListedTransaction(t.transactional_id, t.producer_id, t.transaction_state, node)
            for t in response.transaction_states
        ]
    return sorted(listed, key=lambda t: t.transactional_id)


async def describe_transactions(
    client: KafkaClient, transactional_ids: list[str], *, missing_ok: bool = False
) -> list[TransactionDescription]:
    """The coordinators' view of each id; TRANSACTIONAL_ID_NOT_FOUND fails unless ``missing_ok``."""
    by_coordinator: dict[int, list[str]] = defaultdict(list)
    for transactional_id in dict.fromkeys(transactional_ids):
        by_coordinator[await find_coordinator(client, KeyType.TRANSACTION, transactional_id)].append(transactional_id)
    found: dict[str, TransactionDescription] = {}
    for node, ids in sorted(by_coordinator.items()):

        def build(version: int, ids: list[str] = ids) -> DescribeTransactionsRequest:
            return DescribeTransactionsRequest(transactional_ids=ids)

        response = await client.call(DescribeTransactionsRequest, build, DescribeTransactionsResponse, node_id=node)
        for state in response.transaction_states:
            if state.error_code == Errors.TRANSACTIONAL_ID_NOT_FOUND and missing_ok:
                continue
            check(state.error_code, context=f"transactional id {state.transactional_id}")
            found[state.transactional_id] = TransactionDescription(
                state.transactional_id,
                node,
                state.transaction_state,
                state.producer_id,
                state.producer_epoch,
                state.transaction_timeout_ms,
                None if state.transaction_start_time_ms < 0 else state.transaction_start_time_ms,
                sorted((t.topic, p) for t in state.topics for p in t.partitions),
            )
    return [found[t] for t in dict.fromkeys(transactional_ids) if t in found]


async def describe_producers(client: KafkaClient, topic: str, partitions: list[int] | None = None) -> dict[int, list[ActiveProducer]]:
    """The active producers of some partitions (None: all), asked of each partition's leader."""
    info = await client.topic(topic)
    wanted = [p.partition for p in info.partitions] if partitions is None else partitions
    by_leader: dict[int, list[int]] = defaultdict(list)
    for index in wanted:
        by_leader[info.partition(index).leader].append(index)
    result: dict[int, list[ActiveProducer]] = {}
    for leader, indexes in sorted(by_leader.items()):

        def build(version: int, indexes: list[int] = indexes) -> DescribeProducersRequest:
            return DescribeProducersRequest(topics=[TopicRequest(name=topic, partition_indexes=indexes)])

        response = await client.call(DescribeProducersRequest, build, DescribeProducersResponse, node_id=leader)
        for topic_response in response.topics:
            for answer in topic_response.partitions:
                check(answer.error_code, answer.error_message, context=f"DescribeProducers {topic}-{answer.partition_index}")
                result[answer.partition_index] = sorted(
                    (
                        ActiveProducer(
                            p.producer_id,
                            p.producer_epoch,
                            p.last_sequence,
                            p.last_timestamp,
                            p.coordinator_epoch,
                            None if p.current_txn_start_offset < 0 else p.current_txn_start_offset,
                        )
                        for p in answer.active_producers
                    ),
                    key=lambda p: p.producer_id,
                )
    return {index: result.get(index, []) for index in wanted}


async def find_open_transaction(client: KafkaClient, topic: str, partition: int, start_offset: int) -> ActiveProducer:
    """The producer whose open transaction on ``topic-partition`` starts at ``start_offset``."""
    producers = (await describe_producers(client, topic, [partition]))[partition]
    for producer in producers:
        if producer.current_txn_start_offset == start_offset:
            return producer
    open_at = sorted(p.current_txn_start_offset for p in producers if p.current_txn_start_offset is not None)
    raise ClientError(
        Errors.INVALID_TXN_STATE,
        f"no open transaction starts at offset {start_offset} of {topic}-{partition}"
        f" (open transactions start at: {', '.join(map(str, open_at)) or 'none'})",
    )


async def abort_transaction(
    client: KafkaClient, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int
) -> None:
    """WriteTxnMarkers ABORT for one producer on one partition, sent to the partition's leader."""
    leader = (await client.topic(topic)).partition(partition).leader

    def build(version: int) -> WriteTxnMarkersRequest:
        marker = WritableTxnMarker(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transaction_result=False,
            topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
            coordinator_epoch=coordinator_epoch,
        )
        return WriteTxnMarkersRequest(markers=[marker])

    response = await client.call(WriteTxnMarkersRequest, build, WriteTxnMarkersResponse, node_id=leader)
    codes = [p.error_code for m in response.markers for t in m.topics for p in t.partitions]
    if not codes:
        raise KafkaResponseError(-1, f"WriteTxnMarkers answered without {topic}-{partition}")
    for code in codes:
        check(code, context=f"aborting producer {producer_id} epoch {producer_epoch} on {topic}-{partition}")


async def find_hanging(
    client: KafkaClient, topics: list[str], max_age_ms: int, now_ms: int
) -> list[OpenTransaction]:
    """Every open transaction on ``topics`` idle for at least ``max_age_ms``, with a verdict.

    Age is ``now_ms`` minus the producer's last timestamp, as Kafka's tool measures it. Without
    ListTransactions/DescribeTransactions on the brokers every such transaction counts as hanging.
    """
    candidates: list[tuple[str, int, ActiveProducer, int]] = []
    for topic in topics:
        for partition, producers in sorted((await describe_producers(client, topic)).items()):
            for producer in producers:
                age = now_ms - producer.last_timestamp
                if producer.current_txn_start_offset is not None and age >= max_age_ms:
                    candidates.append((topic, partition, producer, age))
    if not candidates:
        return []
    try:
        pids = sorted({c[2].producer_id for c in candidates})
        ids = {t.producer_id: t.transactional_id for t in await list_transactions(client, producer_ids=pids)}
        descriptions = {
            d.producer_id: d for d in await describe_transactions(client, sorted(set(ids.values())), missing_ok=True)
        }
    except UnsupportedApiError as exc:
        return [
            OpenTransaction(t, p, producer, age, True, f"coordinator lookup not possible: {exc.message}")
            for t, p, producer, age in candidates
        ]
    return [
        _verdict(topic, partition, producer, age, ids.get(producer.producer_id), descriptions.get(producer.producer_id))
        for topic, partition, producer, age in candidates
    ]


def _verdict(
    topic: str, partition: int, producer: ActiveProducer, age: int, transactional_id: str | None, described: TransactionDescription | None
) -> OpenTransaction:
    def result(hanging: bool, reason: str) -> OpenTransaction:
        return OpenTransaction(topic, partition, producer, age, hanging, reason, transactional_id)

    if transactional_id is None or described is None:
        return result(True, "no transactional id has this producer id")
    if described.state != ONGOING:
        return result(True, f"the coordinator's transaction is {described.state}")
    if described.producer_epoch != producer.producer_epoch:
        return result(True, f"the coordinator's transaction has epoch {described.producer_epoch}")
    if (topic, partition) not in described.partitions:
        return result(True, "the coordinator's ongoing transaction does not include this partition")
    return result(False, "ongoing in its coordinator, which completes or times it out")
