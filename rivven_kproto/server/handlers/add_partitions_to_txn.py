"""AddPartitionsToTxn (24), v0-5. v0-3 are the client form: unknown partitions fail with
UNKNOWN_TOPIC_OR_PARTITION and the rest of the request with OPERATION_NOT_ATTEMPTED, as Kafka does.
v4+ is the broker-to-coordinator form (KIP-890 part 1): it needs ClusterAction on the cluster (else
a top-level CLUSTER_AUTHORIZATION_FAILED), carries several transactions, and each either verifies
its partitions (``verify_only``: NONE or TRANSACTION_ABORTABLE per partition, INVALID_TXN_STATE for
v4 requests, which predate that error) or adds them (with transactions V2 semantics at v5 when the
broker's ``transaction.version`` is 2: what a V2 Produce's leader asks). A leader that coordinates
calls the coordinator in process; in a cluster the others send v5 (server/handlers/_txn_verification.py).
A group coordinator verifies a TxnOffsetCommit the same way, with the group's partition
``<shard>`` of ``__consumer_offsets``: in the transaction once AddOffsetsToTxn added a group of
that shard."""

from __future__ import annotations

from rivven_kproto.broker.coordinator_shards import GROUP_SHARD_TOPIC
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
    AddPartitionsToTxnTransaction,
)

from ..context import RequestContext
from ..routes import LOCAL
from .txn_errors import ADD_PARTITIONS_ABORTABLE, abortable_for_version, fenced_for_version

API_KEY = 24
ROUTE = LOCAL
CLUSTER = rule(API_KEY).check("cluster")
TRANSACTIONAL_ID = rule(API_KEY).check("transactional_id")
TOPIC = rule(API_KEY).check("topic")


BROKER_FORM = 4


def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest, version: int) -> AddPartitionsToTxnResponse:
    if version >= BROKER_FORM:
        return _handle_batched(ctx, request, version)
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    unknown = set()
    for topic, index in wanted:
        try:
            ctx.broker.check_partition_exists(topic, index)
        except KafkaError:
            unknown.add((topic, index))
    errors: dict[tuple[str, int], Errors]
    denied = {(t, p): refused for t, p in wanted if (refused := ctx.refusal(TOPIC, t)) is not None}
    txn_refused = ctx.refusal(TRANSACTIONAL_ID, request.v3_and_below_transactional_id)
    if txn_refused is not None:
        errors = dict.fromkeys(wanted, txn_refused)
    elif denied:
        errors = {tp: denied.get(tp, Errors.OPERATION_NOT_ATTEMPTED) for tp in wanted}
    elif not ctx.broker.coordinates(request.v3_and_below_transactional_id):  # another broker's shard
        errors = dict.fromkeys(wanted, Errors.NOT_COORDINATOR)
    elif unknown:
        errors = {tp: Errors.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else Errors.OPERATION_NOT_ATTEMPTED for tp in wanted}
    else:
        error = ctx.txn_for(request.v3_and_below_transactional_id).add_partitions(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            wanted,
            ctx.now_ms,
        )
        errors = dict.fromkeys(wanted, fenced_for_version(error, version, 2))
    results = [
        AddPartitionsToTxnTopicResult(
            name=topic.name,
            results_by_partition=[
                AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=errors[(topic.name, p)])
                for p in topic.partitions
            ],
        )
        for topic in request.v3_and_below_topics
    ]
    return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=results)


def _results(topics: list[AddPartitionsToTxnTopic], errors: dict[tuple[str, int], Errors]) -> list[AddPartitionsToTxnTopicResult]:
    return [
        AddPartitionsToTxnTopicResult(
            name=topic.name,
            results_by_partition=[
                AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=errors[(topic.name, p)])
                for p in topic.partitions
            ],
        )
        for topic in topics
    ]


def _handle_batched(ctx: RequestContext, request: AddPartitionsToTxnRequest, version: int) -> AddPartitionsToTxnResponse:
    if (refused := ctx.refusal(CLUSTER)) is not None:  # Kafka: inter-broker only
        return AddPartitionsToTxnResponse(error_code=refused)
    results = [
        AddPartitionsToTxnResult(transactional_id=txn.transactional_id, topic_results=_results(txn.topics, _one(ctx, txn, version)))
        for txn in request.transactions
    ]
    return AddPartitionsToTxnResponse(error_code=Errors.NONE, results_by_transaction=results)


def _one(ctx: RequestContext, txn: AddPartitionsToTxnTransaction, version: int) -> dict[tuple[str, int], Errors]:
    wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
    coordinator = ctx.broker.txn_coordinator(txn.transactional_id)
    if coordinator is None:  # its shard is another broker's (or nobody's now)
        return dict.fromkeys(wanted, Errors.NOT_COORDINATOR)
    if txn.verify_only:
        errors = coordinator.verify_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted,
                                               offsets_partition=lambda group: (GROUP_SHARD_TOPIC,
                                                                                ctx.broker.shard_of(group)))
    else:
        v2 = version >= ADD_PARTITIONS_ABORTABLE and ctx.config.transaction_version >= 2
        error = coordinator.add_partitions(
            txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted, ctx.now_ms, client_txn_version=2 if v2 else 0
        )
        errors = dict.fromkeys(wanted, error)
    return {tp: abortable_for_version(e, version, ADD_PARTITIONS_ABORTABLE) for tp, e in errors.items()}
