"""CreateTopics (key 19), versions 2-7: create topics synchronously, Kafka's checks and messages.

Per topic, in the order of Kafka 3.9's KRaft controller: a name used twice in one request is
INVALID_REQUEST ("Duplicate topic name.", one result for the name); Kafka's internal topic names
(``__cluster_metadata``, ``__consumer_offsets``, ``__transaction_state``: our coordinators keep
their state elsewhere) are INVALID_REQUEST; then the name (INVALID_TOPIC_EXCEPTION, also for a '.'/'_' collision with an
existing topic), TOPIC_ALREADY_EXISTS, null config values and bad configs (INVALID_CONFIG), a
manual assignment (INVALID_REQUEST unless both counts are -1; each partition's replicas must be
distinct live brokers, as many for every partition, else INVALID_REPLICA_ASSIGNMENT: the topic
keeps the assignment, whose first live broker leads the partition, and its replica count is the
topic's replication factor), the replication factor (at most the live brokers, else
INVALID_REPLICATION_FACTOR) and the partition count (INVALID_PARTITIONS). ``validate_only`` runs
every check and answers as for a real creation. v5+ results carry the partition count,
replication factor and the topic's effective configs. ``timeout_ms`` is ignored: creation is
synchronous. Topic ids are answered as zero, like Metadata.

Create on the Cluster or the topic, else TOPIC_AUTHORIZATION_FAILED (the authorization table); v5+
without DescribeConfigs on the topic: no configs, partition count or replication factor, and
``topic_config_error_code`` TOPIC_AUTHORIZATION_FAILED.
Not implemented: create-topic policies, quotas
(THROTTLING_QUOTA_EXCEEDED).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Sequence

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.topics import INTERNAL_TOPICS
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from rivven_kproto.server.context import RequestContext

from ..routes import CONTROLLER

log = logging.getLogger(__name__)

API_KEY = CreateTopicsRequest.API_KEY
ROUTE = CONTROLLER  # changes the catalog, configs, ACLs or credentials: one writer
TOPIC, CONFIGS = rule(API_KEY).check("topic"), rule(API_KEY).check("configs")

ZERO_UUID = uuid.UUID(int=0)


def handle(ctx: RequestContext, request: CreateTopicsRequest, version: int) -> CreateTopicsResponse:
    counts = Counter(topic.name for topic in request.topics)
    results: list[CreatableTopicResult] = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        if topic.name in INTERNAL_TOPICS:
            results.append(
                _error(
                    topic.name,
                    Errors.INVALID_REQUEST,
                    f"Creation of internal topic {topic.name} is prohibited.",
                )
            )
            continue
        if (refused := ctx.refusal(TOPIC, topic.name)) is not None:  # Create on the topic or the Cluster
            results.append(_error(topic.name, refused, "Authorization failed."))
            continue
        try:
            results.append(_create(ctx, topic, version, request.validate_only))
        except KafkaError as exc:
            results.append(_error(topic.name, exc.error, exc.message))
    # Kafka answers each duplicated name once, after the others.
    results.extend(
        _error(name, Errors.INVALID_REQUEST, "Duplicate topic name.") for name, n in counts.items() if n > 1
    )
    return CreateTopicsResponse(topics=results)


def _create(
    ctx: RequestContext, topic: CreatableTopic, version: int, validate_only: bool
) -> CreatableTopicResult:
    broker = ctx.broker
    broker.check_new_topic_name(topic.name)
    nulls = [config.name for config in topic.configs if config.value is None]
    if nulls:
        raise KafkaError(
            Errors.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls)
        )
    configs = {config.name: config.value for config in topic.configs if config.value is not None}
    broker.validate_topic_configs(configs)
    num_partitions, replication_factor = topic.num_partitions, topic.replication_factor
    assignments: list[list[int]] = []
    if topic.assignments:
        assignments = _check_assignments(broker.cluster.node_ids, topic)
        num_partitions, replication_factor = len(assignments), len(assignments[0])
    created = broker.create_topic(
        topic.name, num_partitions, replication_factor, configs, ctx.now_ms, validate_only=validate_only,
        assignments=assignments,
    )
    if created is None:  # validate_only
        partitions = num_partitions if num_partitions != -1 else broker.config.num_partitions
        replicas = replication_factor if replication_factor != -1 else broker.config.default_replication_factor
    else:
        partitions = len(created.partitions)
        replicas = created.meta.replication_factor  # as Metadata and DescribeTopics will list them
        log.info("created topic %s (%d partitions) for client %s", topic.name, partitions, ctx.client_id)
    topic_id = ZERO_UUID if created is None else created.meta.topic_id  # validate_only: Kafka's zero id
    result = CreatableTopicResult(name=topic.name, topic_id=topic_id, error_code=0, error_message=None)
    if version >= 5 and (refused := ctx.refusal(CONFIGS, topic.name)) is not None:
        result.topic_config_error_code = refused  # Kafka's controller: no configs without DescribeConfigs
    elif version >= 5:
        result.num_partitions = partitions
        result.replication_factor = replicas
        result.configs = [
            CreatableTopicConfigs(
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=int(entry.source),
                is_sensitive=entry.sensitive,
            )
            for entry in broker.topic_config_description(configs, canonical=False)
        ]
    return result


def _check_assignments(live: Sequence[int], topic: CreatableTopic) -> list[list[int]]:
    """Kafka's manual-assignment rules against the live brokers; returns the replicas by partition."""
    if topic.replication_factor != -1:
        raise KafkaError(
            Errors.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        )
    if topic.num_partitions != -1:
        raise KafkaError(
            Errors.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    seen: set[int] = set()
    replication_factor: int | None = None
    for assignment in topic.assignments:
        if assignment.partition_index in seen:
            raise KafkaError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"Found multiple manual partition assignments for partition {assignment.partition_index}",
            )
        check_replicas(live, assignment.broker_ids, replication_factor)
        replication_factor = len(assignment.broker_ids)
        seen.add(assignment.partition_index)
    if seen != set(range(len(seen))):
        raise KafkaError(
            Errors.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"
        )
    by_index = {assignment.partition_index: list(assignment.broker_ids) for assignment in topic.assignments}
    return [by_index[index] for index in range(len(seen))]


def check_replicas(live: Sequence[int], broker_ids: list[int], replication_factor: int | None) -> None:
    """Kafka's validateManualPartitionAssignment: the live brokers are the registered ones."""
    if not broker_ids:
        raise KafkaError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    previous = None
    for broker_id in sorted(broker_ids):
        if broker_id not in live:
            raise KafkaError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
            )
        if broker_id == previous:
            raise KafkaError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id
    if replication_factor is not None and len(broker_ids) != replication_factor:
        raise KafkaError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with {len(broker_ids)} replica(s), but this "
            f"is not consistent with previous partitions, which have {replication_factor} replica(s).",
        )


def _error(name: str, error: Errors, message: str | None) -> CreatableTopicResult:
    return CreatableTopicResult(name=name, error_code=int(error), error_message=message)
