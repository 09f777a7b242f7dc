"""Metadata (key 3), versions 0-12: brokers, cluster id, controller and topic layout.

Alone (the native log), this node is the only broker, the controller and the leader of every
partition (replicas and ISR are just this node, leader epoch 0). Brokers sharing a store list the
live brokers; each partition is led by the one ``broker.cluster`` ranks first for it, its replicas
and ISR are as many live brokers as the topic's replication factor, and the controller is the
broker holding the coordinator lease. A request naming topics that do not exist creates them when
``auto.create.topics.enable`` is on and the client allows it (v4+; always before v4), as Kafka
does. Kafka answers LEADER_NOT_AVAILABLE for a topic it has just started creating; we create it
synchronously, so we answer NONE with its partitions at once and save the client a retry. A
broker that is not the controller of brokers sharing a store asks the controller to create them
(``prepare``, a CreateTopics request as Kafka's brokers send one), which answers once every live
broker has the new catalog: the topic is then described at once too, or LEADER_NOT_AVAILABLE
while it is not here yet (the client asks again). With an authorizer it is not asked (the
request would not carry the client's identity): LEADER_NOT_AVAILABLE until created otherwise.

Topic ids (v10+) are the ids kept in the topic table; v12 looks topics up by id (unknown ->
UNKNOWN_TOPIC_ID, not describable -> TOPIC_AUTHORIZATION_FAILED, both with a null name, as Kafka:
ids are not secret). A request naming more than ``TOPICS_PER_TURN`` topics is answered a slice
per event-loop turn (``prepare``): a client naming 24,000 topics stalled every other client for
the whole request. Not implemented: racks. Kafka's internal topic names
(``__consumer_offsets``, ``__transaction_state``, ``__cluster_metadata``) are never auto-created:
our coordinators do not live in topics, and a user topic by that name would only confuse tools.
"""

from __future__ import annotations

import functools
import logging
import uuid
from typing import cast

import trio

from rivven_kproto.broker.broker import Topic
from rivven_kproto.broker.log.partition import LEADER_EPOCH
from rivven_kproto.broker.security.acls import CLUSTER_NAME, ResourceType
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.topics import INTERNAL_TOPICS, validate_topic_name
from rivven_kproto.codec.acls import CLUSTER_OPERATIONS, OPERATIONS_NOT_REQUESTED, TOPIC_OPERATIONS
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from rivven_kproto.codec.schema import CachedArray
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.peers import create_topics

from ..routes import LOCAL

log = logging.getLogger(__name__)

API_KEY = MetadataRequest.API_KEY
ROUTE = LOCAL
TOPIC = rule(API_KEY).check("topic")
CLUSTER_SHOWN = rule(API_KEY).check("cluster_operations")
LISTED = rule(API_KEY).check("listed")
CREATE = rule(API_KEY).check("create")

ZERO_TOPIC_ID = uuid.UUID(int=0)
AUTO_CREATE_WAIT_S = 15.0  # how long a follower waits for the controller to create a topic
AUTO_CREATE_TIMEOUT_MS = 10_000  # the CreateTopics timeout it asks for
TOPICS_PER_TURN = 500  # named topics answered before other tasks get the event loop


async def prepare(ctx: RequestContext, request: MetadataRequest, limiter: trio.CapacityLimiter) -> None:
    await _ask_controller_to_create(ctx, request)
    if request.topics is not None and len(request.topics) > TOPICS_PER_TURN:
        await _answer_in_turns(ctx, request)


async def _answer_in_turns(ctx: RequestContext, request: MetadataRequest) -> None:
    """Each named topic's answer (``handle`` takes them from ``ctx.metadata_answers``), yielding
    the event loop every ``TOPICS_PER_TURN``: the answers are per topic, as Kafka's metadata
    cache gives them, so a topic created or deleted meanwhile shows in some answers only."""
    allow_create = ctx.config.auto_create_topics and request.allow_auto_topic_creation
    operations = request.include_topic_authorized_operations
    answers = ctx.metadata_answers
    done = 0
    for entry in request.topics or []:
        name = entry.name
        if name is None or name in answers:
            continue
        answer = _named_topic(ctx, name, allow_create)
        if operations:
            answer.topic_authorized_operations = ctx.authorized_operations(ResourceType.TOPIC, name, TOPIC_OPERATIONS)
        answers[name] = answer
        done += 1
        if done % TOPICS_PER_TURN == 0:
            await trio.lowlevel.checkpoint()


async def _ask_controller_to_create(ctx: RequestContext, request: MetadataRequest) -> None:
    """Not the controller: ask it to create the requested topics this Metadata request
    auto-creates (``handle`` then finds them in the catalog, or answers LEADER_NOT_AVAILABLE).
    The client's rights are checked here, as for a creation on the controller; the controller is
    asked by this broker, as itself."""
    broker = ctx.broker
    controller = broker.cluster.coordinator
    if (broker.cluster.is_coordinator or controller is None or not request.topics
            or not (ctx.config.auto_create_topics and request.allow_auto_topic_creation)):
        return
    names = list(dict.fromkeys(
        entry.name for entry in request.topics
        if entry.name is not None and entry.name not in broker.topics and entry.name not in INTERNAL_TOPICS
        and _valid_name(entry.name) and ctx.permits(TOPIC, entry.name)
        and _may_create(ctx, entry.name)))
    if not names:
        return
    errors: dict[str, Errors] = {}
    with trio.move_on_after(AUTO_CREATE_WAIT_S):
        try:
            errors = await create_topics(controller, names, broker.cluster.self_id, AUTO_CREATE_TIMEOUT_MS)
        except (OSError, trio.TooSlowError, ValueError) as exc:
            log.warning("asking the controller (node %d) to create %s failed: %s", controller.node_id, names, exc)
            return
    for name, error in errors.items():
        if error in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
            log.info("auto-created topic %s on the controller (node %d) for client %s", name, controller.node_id,
                     ctx.client_id)
        else:
            log.warning("the controller (node %d) did not auto-create topic %s: %s", controller.node_id, name,
                        error.name)


def _may_create(ctx: RequestContext, name: str) -> bool:
    """Auto-creation needs Create on the topic or on the cluster (Kafka)."""
    return ctx.permits(CREATE, name)


def _valid_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except KafkaError:
        return False
    return True


def handle(ctx: RequestContext, request: MetadataRequest, version: int) -> MetadataResponse:
    broker = ctx.broker
    all_topics = request.topics is None or (version == 0 and not request.topics)
    if all_topics:  # with an authorizer, topics the client may not Describe are left out, as Kafka
        topics = [
            describe_topic(ctx, topic) for name, topic in sorted(broker.topics.items())
            if ctx.permits(LISTED, name)
        ]
    else:
        allow_create = ctx.config.auto_create_topics and request.allow_auto_topic_creation
        topics = _requested_topics(ctx, request.topics or [], allow_create, version)
    if version >= 8 and request.include_topic_authorized_operations:
        for entry in topics:
            if entry.topic_authorized_operations != OPERATIONS_NOT_REQUESTED:
                continue  # answered by ``prepare``
            entry.topic_authorized_operations = ctx.authorized_operations(
                ResourceType.TOPIC, entry.name or "", TOPIC_OPERATIONS
            )
    cluster_operations = OPERATIONS_NOT_REQUESTED
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        cluster_operations = (ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
                              if ctx.permits(CLUSTER_SHOWN) else 0)  # Kafka: only with Describe on the Cluster
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=node, host=host, port=port, rack=None) for node, host, port in ctx.brokers()],
        cluster_id=broker.cluster_id,
        controller_id=broker.cluster.coordinator_id if broker.cluster.coordinator_id is not None else -1,
        topics=topics,
        cluster_authorized_operations=cluster_operations,
    )


def describe_topic(ctx: RequestContext, topic: Topic) -> MetadataResponseTopic:
    cluster = ctx.broker.cluster
    if len(cluster.nodes) == 1:
        # Encoded once per layout and version, then written as bytes (the array is not a list here).
        partitions = cast("list[MetadataResponsePartition]", partition_layout(len(topic.partitions), cluster.self_id))
    else:
        partitions = []
        for index in range(len(topic.partitions)):
            replicas = cluster.replicas(topic.meta.topic_id, index, topic.meta.replication_factor,
                                        topic.meta.assigned(index))
            partitions.append(MetadataResponsePartition(
                error_code=Errors.NONE, partition_index=index, leader_id=replicas[0], leader_epoch=LEADER_EPOCH,
                replica_nodes=replicas, isr_nodes=replicas, offline_replicas=[]))
    return MetadataResponseTopic(
        error_code=Errors.NONE, name=topic.name, topic_id=topic.meta.topic_id, is_internal=topic.name in INTERNAL_TOPICS,
        partitions=partitions,
    )


@functools.lru_cache(maxsize=1024)
def partition_layout(count: int, node: int) -> CachedArray:
    """A topic's partitions as Metadata describes them: one node leads every partition, so the
    layout depends only on the partition count and the node id."""
    return CachedArray(lambda: [
        MetadataResponsePartition(
            error_code=Errors.NONE,
            partition_index=index,
            leader_id=node,
            leader_epoch=LEADER_EPOCH,
            replica_nodes=[node],
            isr_nodes=[node],
            offline_replicas=[],
        )
        for index in range(count)
    ])


def _error_topic(error: Errors, name: str | None, topic_id: uuid.UUID = ZERO_TOPIC_ID) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=error, name=name, topic_id=topic_id, is_internal=name in INTERNAL_TOPICS, partitions=[]
    )


def _requested_topics(
    ctx: RequestContext, requested: list[MetadataRequestTopic], allow_create: bool, version: int
) -> list[MetadataResponseTopic]:
    """Answer each named topic once, in request order (Kafka dedupes through a set)."""
    answers: list[MetadataResponseTopic] = []
    seen: set[str | uuid.UUID] = set()
    for entry in requested:
        if entry.name is None:
            # By id (v12). Before v12 a null name is malformed, and the response cannot carry one.
            if version < 12:
                answers.append(_error_topic(Errors.INVALID_REQUEST, ""))
            elif entry.topic_id not in seen:
                seen.add(entry.topic_id)
                answers.append(_topic_by_id(ctx, entry.topic_id))
            continue
        if entry.name in seen:
            continue
        seen.add(entry.name)
        prepared = ctx.metadata_answers.get(entry.name)
        answers.append(prepared if prepared is not None else _named_topic(ctx, entry.name, allow_create))
    return answers


def _topic_by_id(ctx: RequestContext, topic_id: uuid.UUID) -> MetadataResponseTopic:
    topic = ctx.broker.topic_by_id(topic_id) if topic_id != ZERO_TOPIC_ID else None
    if topic is None:
        return _error_topic(Errors.UNKNOWN_TOPIC_ID, None, topic_id)
    if (refused := ctx.refusal(TOPIC, topic.name)) is not None:
        return _error_topic(refused, None, topic_id)
    return describe_topic(ctx, topic)


def _named_topic(ctx: RequestContext, name: str, allow_create: bool) -> MetadataResponseTopic:
    topic = ctx.broker.topics.get(name)
    if (refused := ctx.refusal(TOPIC, name)) is not None:
        return _error_topic(refused, name)
    if topic is not None:
        return describe_topic(ctx, topic)
    allow_create = allow_create and _may_create(ctx, name)
    try:
        validate_topic_name(name)
    except KafkaError as exc:
        return _error_topic(exc.error, name)
    if not allow_create or name in INTERNAL_TOPICS:
        return _error_topic(Errors.UNKNOWN_TOPIC_OR_PARTITION, name)
    try:
        ctx.broker.create_topic(name, -1, -1, {}, ctx.now_ms)
    except KafkaError as exc:
        if exc.error == Errors.NOT_CONTROLLER:  # another broker of the cluster creates topics: ask again later
            return _error_topic(Errors.LEADER_NOT_AVAILABLE, name)
        log.warning("auto-creating topic %s failed: %s", name, exc)
        return _error_topic(exc.error, name)
    log.info("auto-created topic %s for client %s", name, ctx.client_id)
    return describe_topic(ctx, ctx.broker.topic(name))
