"""TxnOffsetCommit (28), v0-5: a transaction's consumed offsets, committed with the transaction.

Checks in the order of Kafka's (new) group coordinator, each answering for every partition:
partitions of an unknown topic (or beyond its partition count) answer UNKNOWN_TOPIC_OR_PARTITION
and take no further part; an empty group id answers INVALID_GROUP_ID; the transaction
coordinator then verifies that the producer id and epoch are the transactional id's current ones
and that its ongoing transaction holds the group (AddOffsetsToTxn): else
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v3, KIP-588) or
INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4 on, KIP-890, as Kafka's verification answers).
When another broker coordinates the transaction (a cluster), that broker verifies it before the
handler runs (``prepare``: ``_txn_verification.offsets_at_coordinator``), under a guard the producer's next
marker here voids: offsets of a transaction that ended (aborted by a fencing InitProducerId or a
timeout while the group's coordinator failed over) are refused, not left pending for good.
With transactions V2 (v5 on a broker whose ``transaction.version`` is 2, KIP-890 part 2) the
request itself adds the group to the transaction (no AddOffsetsToTxn): a stale epoch is then
INVALID_PRODUCER_EPOCH, the coordinator's PRODUCER_FENCED as Kafka's verification translates it.
KIP-447 (v3): generation id, member id and group instance id, when given, are
checked against the group like a plain commit's (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID); generation -1 with no member id skips that check, as v0-2 requests always do.
Too-long metadata answers OFFSET_METADATA_TOO_LARGE for that partition.

Authorization, in Kafka's order, for every partition: Write on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on the group (GROUP_AUTHORIZATION_FAILED), Read on
the topic (TOPIC_AUTHORIZATION_FAILED).

The offsets are written to the group coordinator's log as *pending* for the producer id before the
answer. They are not visible to OffsetFetch (which reports UNSTABLE_OFFSET_COMMIT for them when
asked ``require_stable``) until the transaction ends: its commit installs them, its abort (also by
timeout or by a fencing InitProducerId) drops them.
"""

from __future__ import annotations

import trio

from rivven_kproto.broker.faults import fault_point
from rivven_kproto.broker.groups.api import CommitPartition
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

from ..context import RequestContext
from ..routes import LOCAL
from ._offset_commits import partitions_to_commit, record_results, response_topics
from ._txn_verification import offsets_at_coordinator
from .txn_errors import (
    TXN_OFFSET_COMMIT_ABORTABLE,
    TXN_OFFSET_COMMIT_V2,
    client_txn_version,
    fenced_for_version,
    verified_offsets_error,
)

API_KEY = TxnOffsetCommitRequest.API_KEY
ROUTE = LOCAL
TRANSACTIONAL_ID = rule(API_KEY).check("transactional_id")
GROUP = rule(API_KEY).check("group")
TOPIC = rule(API_KEY).check("topic")



async def prepare(ctx: RequestContext, request: TxnOffsetCommitRequest, limiter: trio.CapacityLimiter) -> None:
    """A transaction another broker coordinates: ask it about the group's shard first (a cluster)."""
    await offsets_at_coordinator(ctx.broker, ctx, request, ctx.api_version)


def handle(ctx: RequestContext, request: TxnOffsetCommitRequest, version: int) -> TxnOffsetCommitResponse:
    # Kafka's order: Write on the transactional id (the producer id is the id's: a client that may
    # not write it must not open or fence its transaction), Read on the group, Read on each topic.
    refused = ctx.refusal(TRANSACTIONAL_ID, request.transactional_id) or ctx.refusal(GROUP, request.group_id)
    errors, to_commit = partitions_to_commit(ctx, request.group_id, request.topics, refused, TOPIC)
    if to_commit:
        record_results(errors, to_commit, _commit(ctx, request, to_commit, version))
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=response_topics(request.topics, errors, TxnOffsetCommitResponseTopic,
                               TxnOffsetCommitResponsePartition),
    )


def _commit(ctx: RequestContext, request: TxnOffsetCommitRequest, partitions: list[CommitPartition],
            version: int) -> list[Errors]:
    if not request.group_id:
        return [Errors.INVALID_GROUP_ID] * len(partitions)
    error = _join_transaction(ctx, request, version)
    if error is not Errors.NONE:
        return [error] * len(partitions)
    try:
        errors = ctx.groups_for(request.group_id).commit_txn_offsets(
            request.group_id, request.producer_id, request.producer_epoch, request.generation_id,
            request.member_id, request.group_instance_id, partitions, ctx.now_ms, guard=ctx.txn_offsets_guard,
        )
    except KafkaError as exc:
        return [exc.error] * len(partitions)
    fault_point("txn-offsets-logged")  # logged, not yet durable nor answered (a crash test's kill)
    return errors


def _join_transaction(ctx: RequestContext, request: TxnOffsetCommitRequest, version: int) -> Errors:
    """V2: add the group to the producer's transaction; V1: verify AddOffsetsToTxn added it."""
    txn = ctx.broker.txn_coordinator(request.transactional_id)
    v2 = client_txn_version(ctx.config.transaction_version, version, TXN_OFFSET_COMMIT_V2) >= 2
    if txn is None:
        # The transaction's shard is another broker's, which said (KIP-890) whether the producer's
        # ongoing transaction holds the group's shard (V1) or added it (V2): offsets of a
        # transaction already over would stay pending, with no marker left to resolve them.
        error = ctx.txn_offsets_added if ctx.txn_offsets_added is not None else Errors.COORDINATOR_NOT_AVAILABLE
        if not v2:
            return verified_offsets_error(error, version)
        return Errors.INVALID_PRODUCER_EPOCH if error == Errors.PRODUCER_FENCED else error
    if v2:
        error = txn.add_offsets(request.transactional_id, request.producer_id, request.producer_epoch,
                                request.group_id, ctx.now_ms, client_txn_version=2)
        return Errors.INVALID_PRODUCER_EPOCH if error == Errors.PRODUCER_FENCED else error
    error = txn.verify_offsets(request.transactional_id, request.producer_id, request.producer_epoch, request.group_id)
    if error == Errors.INVALID_TXN_STATE and version >= TXN_OFFSET_COMMIT_ABORTABLE:
        return Errors.TRANSACTION_ABORTABLE
    return fenced_for_version(error, version, 3)
