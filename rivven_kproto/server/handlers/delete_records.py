"""DeleteRecords (key 21), versions 0-2: move a partition's log start offset forward.

Offset -1 means the high watermark. The answer's low watermark is the new log start offset;
whole segments below it are deleted at once. Errors follow Kafka: OFFSET_OUT_OF_RANGE for an
offset past the high watermark (or negative other than -1), POLICY_VIOLATION on a topic whose
cleanup.policy does not include ``delete``, UNKNOWN_TOPIC_OR_PARTITION; a failed partition's low
watermark is -1.

Not implemented: nothing to wait for (one replica), so ``timeout_ms`` is ignored.
"""

from __future__ import annotations

import logging

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from rivven_kproto.server.context import RequestContext

from ..routes import LOCAL

log = logging.getLogger(__name__)

API_KEY = DeleteRecordsRequest.API_KEY
ROUTE = LOCAL
TOPIC = rule(API_KEY).check("topic")

INVALID_LOW_WATERMARK = -1


def handle(ctx: RequestContext, request: DeleteRecordsRequest, version: int) -> DeleteRecordsResponse:
    topics = [
        DeleteRecordsTopicResult(
            name=topic.name, partitions=[_delete(ctx, topic.name, wanted) for wanted in topic.partitions]
        )
        for topic in request.topics
    ]
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def _delete(ctx: RequestContext, topic: str, wanted: DeleteRecordsPartition) -> DeleteRecordsPartitionResult:
    index = wanted.partition_index
    try:
        if (refused := ctx.refusal(TOPIC, topic)) is not None:
            raise KafkaError(refused)
        partition = ctx.broker.partition(topic, index)
        policy = ctx.broker.topic(topic).meta.configs.get("cleanup.policy", "delete")
        if "delete" not in policy.split(","):
            raise KafkaError(
                Errors.POLICY_VIOLATION,
                f"Records of partition {topic}-{index} can not be deleted due to the configured policy",
            )
        low_watermark = partition.delete_records(wanted.offset, high_watermark=partition.high_watermark)
    except KafkaError as exc:
        log.debug("delete records %s-%d before %d: %s", topic, index, wanted.offset, exc)
        return DeleteRecordsPartitionResult(
            partition_index=index, low_watermark=INVALID_LOW_WATERMARK, error_code=exc.error
        )
    log.info("deleted records of %s-%d below offset %d", topic, index, low_watermark)
    return DeleteRecordsPartitionResult(partition_index=index, low_watermark=low_watermark, error_code=Errors.NONE)
