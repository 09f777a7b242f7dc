"""WriteTxnMarkers (27), v0-1: write COMMIT/ABORT markers to named partitions directly.

Admin tools use it to abort a hanging transaction (``kafka-transactions.sh abort``), and the
coordinator of a cluster of brokers on one store sends it to the leader of each partition of a
transaction that it does not lead itself; the answer waits until the markers are durable. A
marker with an epoch older than the producer's current one gets INVALID_PRODUCER_EPOCH. A marker
on partition ``<shard>`` of ``__consumer_offsets`` is a transaction's end in the groups of a
coordinator shard this broker holds (sent by the transaction's coordinator on another broker):
the producer's pending offsets there are installed or dropped (NOT_COORDINATOR if not held here).
It needs ClusterAction (brokers) or Alter (admins, KIP-664) on the Cluster, as Kafka.
"""

from __future__ import annotations

import logging

from rivven_kproto.broker.coordinator_shards import GROUP_SHARD_TOPIC, complete_producer
from rivven_kproto.broker.faults import fault_active
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

from ..context import RequestContext
from ..log_limits import RateLimitedLog
from ..peers import PEER_CLIENT_PREFIX
from ..routes import LOCAL

API_KEY = 27
ROUTE = LOCAL
CLUSTER = rule(API_KEY).check("cluster")
log = logging.getLogger(__name__)
refusals = RateLimitedLog(log)


def handle(ctx: RequestContext, request: WriteTxnMarkersRequest, version: int) -> WriteTxnMarkersResponse:
    results = []
    refused = ctx.refusal(CLUSTER)
    if refused is not None:  # one line a request, rate-limited: a client chooses how many markers it sends
        refusals.warning("authorization", "WriteTxnMarkers refused for %s from %s: no ClusterAction (or Alter) on "
                         "the cluster (%d markers)", ctx.principal, ctx.client_host.lstrip("/") or "?",
                         len(request.markers))
    for marker in request.markers:
        if refused is not None:
            results.append(WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
                WritableTxnMarkerTopicResult(name=t.name, partitions=[
                    WritableTxnMarkerPartitionResult(partition_index=i, error_code=refused)
                    for i in t.partition_indexes
                ])
                for t in marker.topics
            ]))
            continue
        # An administrative commit/abort of someone's transaction: always leave a trace of who did it
        # (quieter for the cluster's coordinator asking a partition's leader).
        log.log(
            logging.DEBUG if (ctx.client_id or "").startswith(PEER_CLIENT_PREFIX) else logging.WARNING,
            "WriteTxnMarkers %s for producer %d epoch %d on %s from client %r at %s",
            "COMMIT" if marker.transaction_result else "ABORT", marker.producer_id, marker.producer_epoch,
            ", ".join(f"{t.name}{list(t.partition_indexes)}" for t in marker.topics), ctx.client_id,
            ctx.client_host.lstrip("/") or "?",
        )
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                error = Errors.NONE
                if topic.name == GROUP_SHARD_TOPIC:  # a transaction's end in a group shard coordinated here
                    error = _complete_group_shard(ctx, index, marker.producer_id, marker.transaction_result)
                    partitions.append(WritableTxnMarkerPartitionResult(partition_index=index, error_code=error))
                    continue
                try:
                    if fault_active("refuse-txn-markers"):
                        raise KafkaError(Errors.KAFKA_STORAGE_ERROR, "refused (test fault)")
                    log_ = ctx.broker.partition(topic.name, index)
                    log_.append_marker(
                        marker.producer_id, marker.producer_epoch, marker.transaction_result,
                        marker.coordinator_epoch, ctx.now_ms,
                    )
                    ctx.appended = True
                    ctx.touched.append(log_)
                except KafkaError as exc:
                    error = exc.error
                partitions.append(WritableTxnMarkerPartitionResult(partition_index=index, error_code=error))
            topics.append(WritableTxnMarkerTopicResult(name=topic.name, partitions=partitions))
        results.append(WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
    ctx.sync_before_answer = True  # answered once the markers are durable (the coordinator relies on it)
    return WriteTxnMarkersResponse(markers=results)


def _complete_group_shard(ctx: RequestContext, shard: int, producer_id: int, commit: bool) -> Errors:
    """Install (commit) or drop (abort) the producer's pending offsets in the groups of a shard
    this broker coordinates (logged: the answer waits for the commit); NOT_COORDINATOR otherwise."""
    held = ctx.broker.shards.get(shard)
    if held is None:
        return Errors.NOT_COORDINATOR
    try:
        complete_producer(held.groups, producer_id, commit)
    except OSError:
        log.exception("completing producer %d's offsets in coordinator shard %d failed", producer_id, shard)
        return Errors.COORDINATOR_NOT_AVAILABLE
    return Errors.NONE
