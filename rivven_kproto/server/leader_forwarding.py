"""Serving a client whose view of the leaders is stale (#19): every broker of a cluster can serve
every partition, so a Produce, Fetch or ListOffsets naming partitions another broker leads is
not refused with NOT_LEADER_OR_FOLLOWER: those partitions go to their leaders (one request per
leader, as this broker, after this broker checked the client's rights on them) and their answers
are merged into the response, in the request's order. Partitions this broker leads, and any it
cannot forward (unknown, not allowed, leader unknown), are handled here as always; a leader that
cannot be reached answers NOT_LEADER_OR_FOLLOWER for its partitions (the client looks the leader
up again, as with Kafka). A request from another broker is never forwarded again.

Splitting and merging are generic over the messages' shapes (topics holding partitions, each
keyed by topic name and partition index): a handler declaring ``ROUTE = Leader(shape)``
(server/routes.py) says where its message keeps them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.topics import INTERNAL_TOPICS
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.fetch import FetchRequest
from rivven_kproto.codec.messages.produce import ProduceRequest
from rivven_kproto.codec.schema import Request, Response

from .context import RequestContext
from .handlers import produce
from .peers import PEER_CLIENT_PREFIX, call
from .routes import Shape

log = logging.getLogger(__name__)

PartitionKey = tuple[str, int]
MAX_FORWARDED_WAIT_MS = 10_000  # a forwarded Fetch's long-poll (well inside peers.PEER_TIMEOUT_S)


@dataclass
class Split:
    local: Request  # the request with only the partitions handled here
    remote: dict[int, Request]  # leader -> the request with only its partitions


def split(ctx: RequestContext, shape: Shape, request: Request) -> Split | None:
    """The request split by leader; None when nothing in it is forwarded (the usual case)."""
    if (ctx.client_id or "").startswith(PEER_CLIENT_PREFIX):
        return None
    broker = ctx.broker
    if len(broker.cluster.nodes) < 2:
        return None
    topic_entries = getattr(request, shape.topics)
    leaders = [[_remote_leader(ctx, broker, shape, getattr(entry, shape.topic_name), getattr(p, shape.index))
                for p in getattr(entry, shape.partitions)] for entry in topic_entries]
    if all(leader is None for per_topic in leaders for leader in per_topic):
        return None  # the usual case: nothing copied
    keys = [(getattr(e, shape.topic_name), getattr(p, shape.index)) for e in topic_entries
            for p in getattr(e, shape.partitions)]
    if len(set(keys)) != len(keys) or not _may_forward_request(ctx, request):
        return None  # a partition named twice is answered here as it always was
    local_topics: list[Any] = []
    remote: dict[int, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    templates: dict[str, Any] = {}  # a topic's first entry: its remote parts keep its other fields
    for entry, per_topic in zip(topic_entries, leaders, strict=True):
        name = getattr(entry, shape.topic_name)
        templates.setdefault(name, entry)
        kept = []
        for partition, leader in zip(getattr(entry, shape.partitions), per_topic, strict=True):
            if leader is None:
                kept.append(partition)
            else:
                remote[leader][name].append(partition)
        if kept:
            local_topics.append(dataclasses.replace(entry, **{shape.partitions: kept}))

    def with_topics(topics: dict[str, list[Any]]) -> Request:
        entries = [dataclasses.replace(templates[name], **{shape.partitions: parts}) for name, parts in topics.items()]
        return dataclasses.replace(request, **{shape.topics: entries})  # type: ignore[arg-type]

    remote_requests = {leader: with_topics(topics) for leader, topics in remote.items()}
    if isinstance(request, ProduceRequest) and request.acks == 0:
        # Its leaders answer (acks=1) so that this broker knows when they are done; the client
        # still gets no answer.
        remote_requests = {leader: dataclasses.replace(r, acks=1) for leader, r in remote_requests.items()}  # type: ignore[call-arg]
    if isinstance(request, FetchRequest):
        # The local partitions long-poll here and the leaders answer at once (no wait on both);
        # else the leaders long-poll, within the time a peer is given to answer.
        wait = 0 if local_topics else min(request.max_wait_ms, MAX_FORWARDED_WAIT_MS)
        remote_requests = {leader: dataclasses.replace(r, max_wait_ms=wait)  # type: ignore[call-arg]
                           for leader, r in remote_requests.items()}
    return Split(dataclasses.replace(request, **{shape.topics: local_topics}),  # type: ignore[arg-type]
                 remote_requests)


def _may_forward_request(ctx: RequestContext, request: Request) -> bool:
    """A transactional Produce is forwarded only for a client allowed to write its transactional id
    (else it is refused here, as a whole)."""
    if isinstance(request, ProduceRequest) and produce.has_transactional_records(request):
        return request.transactional_id is not None and ctx.permits(produce.TRANSACTIONAL_ID, request.transactional_id)
    return True


def _remote_leader(ctx: RequestContext, broker: Broker, shape: Shape, name: str, index: int) -> int | None:
    topic = broker.topics.get(name)
    if topic is None or name in INTERNAL_TOPICS or not 0 <= index < len(topic.partitions):
        return None
    led_here = topic.partitions[index]
    if led_here is not None and not led_here.fenced:
        return None  # the usual case, decided without hashing
    leader = broker.cluster.leader(topic.meta.topic_id, index, topic.meta.assigned(index))
    if leader == broker.cluster.self_id or broker.cluster.node(leader) is None:
        return None
    if not ctx.permits(shape.check, name):
        return None
    return leader


async def forward(ctx: RequestContext, shape: Shape, version: int, split_: Split) -> dict[PartitionKey, Any]:
    """Each leader's answers, by partition (NOT_LEADER_OR_FOLLOWER where one could not be reached)."""
    answers: dict[PartitionKey, Any] = {}

    async def ask(leader: int, request: Request) -> None:
        node = ctx.broker.cluster.node(leader)
        try:
            if node is None or node.port == 0:
                raise OSError(f"node {leader} has no address")
            response = await call(node, request, version, shape.response_cls, ctx.broker.cluster.self_id)
        except (OSError, trio.TooSlowError, ValueError) as exc:
            log.info("forwarding %s to its leader node %d failed: %s", type(request).__name__, leader, exc)
            for entry in getattr(request, shape.topics):
                for partition in getattr(entry, shape.partitions):
                    index = getattr(partition, shape.index)
                    answers[(getattr(entry, shape.topic_name), index)] = shape.error(
                        index, Errors.NOT_LEADER_OR_FOLLOWER)
            return
        for topic in getattr(response, shape.response_topics):
            name = getattr(topic, shape.response_topic_name)
            for partition in getattr(topic, shape.response_partitions):
                answers[(name, getattr(partition, shape.response_index))] = partition

    async with trio.open_nursery() as nursery:
        for leader, request in split_.remote.items():
            nursery.start_soon(ask, leader, request)
    return answers


def merge(shape: Shape, request: Request, response: Response, forwarded: dict[PartitionKey, Any]) -> Response:
    """``response`` (for the local part) with the forwarded answers, in ``request``'s order."""
    local: dict[PartitionKey, Any] = {}
    for topic in getattr(response, shape.response_topics):
        for partition in getattr(topic, shape.response_partitions):
            local[(getattr(topic, shape.response_topic_name), getattr(partition, shape.response_index))] = partition
    topics = []
    for entry in getattr(request, shape.topics):
        name = getattr(entry, shape.topic_name)
        parts = []
        for partition in getattr(entry, shape.partitions):
            key = (name, getattr(partition, shape.index))
            answer = forwarded.get(key, local.get(key))
            parts.append(answer if answer is not None else shape.error(key[1], Errors.UNKNOWN_SERVER_ERROR))
        topics.append(shape.response_topic(name, parts))
    return dataclasses.replace(response, **{shape.response_topics: topics})  # type: ignore[arg-type]


def has_records(forwarded: dict[PartitionKey, Any]) -> bool:
    """A forwarded Fetch brought records or an error (the local part then answers without waiting)."""
    return any(getattr(p, "records", None) or getattr(p, "error_code", 0) for p in forwarded.values())


def without_wait(request: FetchRequest) -> FetchRequest:
    return dataclasses.replace(request, max_wait_ms=0)


def local_request(split_: Split, forwarded: dict[PartitionKey, Any]) -> Request:
    """What is handled here: the local part, which does not long-poll when a forwarded Fetch
    already brought records or an error (the client gets them at once)."""
    request = split_.local
    if isinstance(request, FetchRequest) and has_records(forwarded):
        return without_wait(request)
    return request
