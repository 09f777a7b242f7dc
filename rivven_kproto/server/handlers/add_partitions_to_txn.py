"""AddPartitionsToTxn (24), v0-3 (the client form; the v4+ broker-to-broker verification form is
out of our range). Unknown partitions fail with UNKNOWN_TOPIC_OR_PARTITION and the rest of the
request with OPERATION_NOT_ATTEMPTED, as Kafka does."""

from __future__ import annotations

from rivven_kproto.broker.security.acls import Operation, ResourceType
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)

from ..context import RequestContext
from .txn_errors import fenced_for_version

API_KEY = 24


def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest, version: int) -> AddPartitionsToTxnResponse:
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    unknown = set()
    for topic, index in wanted:
        try:
            ctx.broker.check_partition_exists(topic, index)
        except KafkaError:
            unknown.add((topic, index))
    errors: dict[tuple[str, int], Errors]
    denied = {(t, p) for t, p in wanted if not ctx.allowed(Operation.WRITE, ResourceType.TOPIC, t)}
    if not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        errors = dict.fromkeys(wanted, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif denied:
        errors = {tp: Errors.TOPIC_AUTHORIZATION_FAILED if tp in denied else Errors.OPERATION_NOT_ATTEMPTED for tp in wanted}
    elif unknown:
        errors = {tp: Errors.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else Errors.OPERATION_NOT_ATTEMPTED for tp in wanted}
    else:
        error = ctx.broker.txn.add_partitions(
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
