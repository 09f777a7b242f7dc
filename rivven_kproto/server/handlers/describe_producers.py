"""DescribeProducers (61), v0: the active producers of partitions, with the start offset of any
open transaction, so a hanging transaction can be found (KIP-664)."""

from __future__ import annotations

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = 61
ROUTE = LOCAL
TOPIC = rule(API_KEY).check("topic")


def handle(ctx: RequestContext, request: DescribeProducersRequest, version: int) -> DescribeProducersResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            try:
                if (refused := ctx.refusal(TOPIC, topic.name)) is not None:
                    raise KafkaError(refused, "Authorization failed.")
                log_ = ctx.broker.partition(topic.name, index)
            except KafkaError as exc:
                partitions.append(PartitionResponse(partition_index=index, error_code=exc.error, error_message=exc.message))
                continue
            producers = [
                ProducerState(
                    producer_id=entry.producer_id,
                    producer_epoch=entry.epoch,
                    last_sequence=entry.last_seq,
                    last_timestamp=entry.last_timestamp,
                    coordinator_epoch=-1,
                    current_txn_start_offset=-1 if entry.txn_first_offset is None else entry.txn_first_offset,
                )
                for entry in log_.producers.producers.values()
            ]
            partitions.append(PartitionResponse(partition_index=index, error_code=Errors.NONE, active_producers=producers))
        topics.append(TopicResponse(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(topics=topics)
