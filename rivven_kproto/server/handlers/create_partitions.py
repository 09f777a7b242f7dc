"""CreatePartitions (key 37), versions 0-3: grow a topic's partition count, synchronously.

Follows Kafka 3.9's controller: a topic named twice is INVALID_REQUEST ("Duplicate topic name.",
answered once); an unknown topic UNKNOWN_TOPIC_OR_PARTITION; a count that is not an increase
INVALID_PARTITIONS; manual assignments must number exactly the partitions added and each must
name as many distinct live brokers as the topic's replication factor, else
INVALID_REPLICA_ASSIGNMENT (kept as CreateTopics keeps them). ``validate_only`` checks without creating;
``timeout_ms`` is ignored. Error messages are Kafka's; success answers a null message.

Alter on each topic, else TOPIC_AUTHORIZATION_FAILED (the authorization table). Not implemented: quotas.
"""

from __future__ import annotations

import logging
from collections import Counter

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)
from rivven_kproto.server.context import RequestContext

from ..routes import CONTROLLER
from .create_topics import check_replicas

log = logging.getLogger(__name__)

API_KEY = CreatePartitionsRequest.API_KEY
ROUTE = CONTROLLER  # changes the catalog, configs, ACLs or credentials: one writer
TOPIC = rule(API_KEY).check("topic")


def handle(ctx: RequestContext, request: CreatePartitionsRequest, version: int) -> CreatePartitionsResponse:
    counts = Counter(topic.name for topic in request.topics)
    results = [
        CreatePartitionsTopicResult(
            name=name, error_code=int(Errors.INVALID_REQUEST), error_message="Duplicate topic name."
        )
        for name, n in counts.items()
        if n > 1
    ]
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        if (refused := ctx.refusal(TOPIC, topic.name)) is not None:
            results.append(CreatePartitionsTopicResult(name=topic.name, error_code=int(refused), error_message=None))
            continue
        if topic.name not in ctx.broker.topics:
            # Kafka's UnknownTopicOrPartitionException() carries no message.
            results.append(
                CreatePartitionsTopicResult(
                    name=topic.name, error_code=int(Errors.UNKNOWN_TOPIC_OR_PARTITION), error_message=None
                )
            )
            continue
        try:
            _create(ctx, topic, request.validate_only)
        except KafkaError as exc:
            results.append(
                CreatePartitionsTopicResult(
                    name=topic.name, error_code=int(exc.error), error_message=exc.message
                )
            )
        else:
            results.append(CreatePartitionsTopicResult(name=topic.name, error_code=0, error_message=None))
    return CreatePartitionsResponse(results=results)


def _create(ctx: RequestContext, topic: CreatePartitionsTopic, validate_only: bool) -> None:
    current = len(ctx.broker.topic(topic.name).partitions)
    if topic.assignments is not None and topic.count > current:
        added = topic.count - current
        if len(topic.assignments) != added:
            raise KafkaError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {added} additional partition(s), but only {len(topic.assignments)} "
                "assignment(s) were specified.",
            )
        factor = ctx.broker.topic(topic.name).meta.replication_factor
        for assignment in topic.assignments:
            check_replicas(ctx.broker.cluster.node_ids, assignment.broker_ids, factor)
    assignments = [list(a.broker_ids) for a in topic.assignments or []] if topic.count > current else None
    ctx.broker.create_partitions(topic.name, topic.count, ctx.now_ms, validate_only=validate_only,
                                 assignments=assignments)
    if not validate_only:
        log.info("topic %s now has %d partitions (client %s)", topic.name, topic.count, ctx.client_id)
