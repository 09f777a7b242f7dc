"""A leader that does not coordinate asks the coordinator before a producer's first transactional
batch on a partition is written (KIP-890): with transactions V1 whether the partition is in the
producer's ongoing transaction (``verify_only``), with V2 to add it. Without the question, a
batch sent after the transaction ended (a late retry, or a client that never called
AddPartitionsToTxn) would open a transaction here that no coordinator knows: a hanging transaction
that holds back the last stable offset forever.

The question goes once per producer, transaction and partition: the partition's producer state
knows when the producer's transaction is already open here. A guard is set in the producer state
before asking; a marker landing meanwhile removes it, so the answer is not applied to a
transaction that ended in between (Kafka's VerificationGuard). The verdicts go to the Produce
handler through the request context.
"""

from __future__ import annotations

import logging
from collections import defaultdict

import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.coordinator_shards import GROUP_SHARD_TOPIC
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.produce import ProduceRequest
from rivven_kproto.codec.messages.txn_offset_commit import TxnOffsetCommitRequest
from rivven_kproto.codec.records.batch import parse_header

from ..context import PartitionKey, RequestContext, TxnVerdict
from ..peers import add_partitions_to_txn
from .txn_errors import PRODUCE_V2, RETRIABLE_VERIFICATION, TXN_OFFSET_COMMIT_V2, client_txn_version

log = logging.getLogger(__name__)



async def verify_with_coordinator(broker: Broker, ctx: RequestContext, request: ProduceRequest, version: int) -> None:
    """Fill ``ctx.txn_verdicts`` for the request's first transactional batches on this leader."""
    transactional_id = request.transactional_id
    if transactional_id is None:
        return
    wanted: dict[tuple[int, int], list[tuple[PartitionKey, object]]] = defaultdict(list)
    for topic_data in request.topic_data:
        for data in topic_data.partition_data:
            try:
                producers = broker.partition(topic_data.name, data.index).producers
                header = parse_header(data.records or b"")
            except (KafkaError, ValueError):
                continue  # the handler answers it
            if not header.is_transactional or not producers.needs_verification(
                    header.producer_id, header.producer_epoch, transactional_id):
                continue
            guard = producers.start_verification(header.producer_id)
            wanted[(header.producer_id, header.producer_epoch)].append(((topic_data.name, data.index), guard))
    if not wanted:
        return
    v2 = client_txn_version(ctx.config.transaction_version, version, PRODUCE_V2) >= 2
    coordinator = broker.cluster.key_coordinator(transactional_id)  # the broker coordinating its shard
    for (producer_id, epoch), entries in wanted.items():
        keys = [key for key, _ in entries]
        if coordinator is None:
            errors = dict.fromkeys(keys, Errors.COORDINATOR_NOT_AVAILABLE)
        else:
            try:
                errors = await add_partitions_to_txn(
                    coordinator, broker.cluster.self_id, transactional_id, producer_id, epoch, keys,
                    verify_only=not v2)
            except (OSError, trio.TooSlowError, ValueError) as exc:
                log.info("AddPartitionsToTxn to the coordinator (node %d) failed: %s", coordinator.node_id, exc)
                errors = dict.fromkeys(keys, Errors.COORDINATOR_NOT_AVAILABLE)
        for key, guard in entries:
            error = errors[key]
            if error in RETRIABLE_VERIFICATION:  # Kafka's leader: an error retried without a metadata refresh
                error = Errors.NOT_ENOUGH_REPLICAS
            elif error == Errors.PRODUCER_FENCED:
                error = Errors.INVALID_PRODUCER_EPOCH  # Produce has no PRODUCER_FENCED: Kafka's leader translates it
            ctx.txn_verdicts[key] = TxnVerdict(error, guard, transactional_id)


async def offsets_at_coordinator(broker: Broker, ctx: RequestContext, request: TxnOffsetCommitRequest,
                                 version: int) -> None:
    """TxnOffsetCommit at a group's coordinator whose transactional id's shard another broker
    holds: ask that broker about the group's shard (partition ``<shard>`` of ``__consumer_offsets``,
    as Kafka's group coordinator does). Transactions V1: is it in the producer's ongoing
    transaction (AddOffsetsToTxn put it there)? V2: add it. Without the question, a TxnOffsetCommit
    retried after its transaction ended (aborted by a fencing InitProducerId or a timeout while the
    group's shard moved) would leave offsets pending that no marker resolves. The question is asked
    under a guard that the producer's next marker here voids (``TxnOffsetGuards``). The answer
    and the guard go to the handler (``ctx.txn_offsets_added``, ``ctx.txn_offsets_guard``)."""
    if not request.group_id or broker.coordinates(request.transactional_id):
        return
    groups = broker.group_coordinator(request.group_id)
    if groups is None:
        return  # not this broker's group: the handler answers NOT_COORDINATOR
    v2 = client_txn_version(ctx.config.transaction_version, version, TXN_OFFSET_COMMIT_V2) >= 2
    ctx.txn_offsets_guard = groups.txn_guards.start(request.producer_id)
    coordinator = broker.cluster.key_coordinator(request.transactional_id)
    key = (GROUP_SHARD_TOPIC, broker.shard_of(request.group_id))
    if coordinator is None:
        ctx.txn_offsets_added = Errors.COORDINATOR_NOT_AVAILABLE
        return
    try:
        errors = await add_partitions_to_txn(coordinator, broker.cluster.self_id, request.transactional_id,
                                             request.producer_id, request.producer_epoch, [key], verify_only=not v2)
    except (OSError, trio.TooSlowError, ValueError) as exc:
        log.info("AddPartitionsToTxn to the coordinator (node %d) failed: %s", coordinator.node_id, exc)
        errors = {key: Errors.COORDINATOR_NOT_AVAILABLE}
    ctx.txn_offsets_added = errors.get(key, Errors.COORDINATOR_NOT_AVAILABLE)

