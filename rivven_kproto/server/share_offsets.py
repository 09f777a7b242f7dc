"""Share-group offsets (Describe/Alter/DeleteShareGroupOffsets) where the partitions' leaders keep
the share state: the PostgreSQL engine, one broker or a cluster (``broker/share/leaders.py``).

The group's coordinator keeps the membership, so it decides what Kafka's group coordinator decides
(the group exists, is a share group, is empty: NON_EMPTY_GROUP otherwise); the share-partitions'
state is in each partition's share-state log, which only the partition's leader writes (fenced by
the partition's writer row). So:

- Describe reads the logs read-only from the database, on a worker thread
  (``storage/postgres/share_state_reads.py``): what every leader made durable before it answered
  a consumer, correct wherever the leaders are and while they move. Its lag uses the partition's
  log here, or for a partition led elsewhere the committed end in the database, or at
  read_committed the last stable offset its leader answers (ListOffsets, ``stable_ends``; lag -1
  where the leader cannot be reached).
- Alter and Delete are made by the leaders: the partitions led here directly, the others'
  forwarded to their leader in an Envelope (the client's principal, so its ACLs apply there, and
  ClusterAction for this broker), which applies them on its share-partition (replacing it in
  memory and on its log) without the group checks. A leader that lost the partition meanwhile
  cannot write (its write is fenced); the next leader replays the log, so a confirmed change is
  what it serves. A leader that cannot be reached answers COORDINATOR_NOT_AVAILABLE (retriable).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, TypeVar

import trio

from rivven_kproto.broker.share import SharePartition
from rivven_kproto.broker.storage.postgres.share_state_reads import group_summary
from rivven_kproto.broker.topics import INTERNAL_TOPICS
from rivven_kproto.codec.connection import ProtocolError
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.envelope import EnvelopeResponse
from rivven_kproto.codec.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from rivven_kproto.codec.messages.share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareOffsetsRequestTopic,
)
from rivven_kproto.codec.schema import Request, Response

from .context import RequestContext
from .forwarding import ENVELOPE_VERSION, unwrap_response, wrap_request
from .peers import call, decode_response
from .share_loading import read_ahead

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Response)
PartitionKey = tuple[str, int]
FORWARDED_API_KEYS = frozenset({91, 92})  # Alter/DeleteShareGroupOffsets: a coordinator asks the leaders
LATEST, READ_COMMITTED, LIST_OFFSETS_VERSION = -1, 1, 5


def kept_by_leaders(ctx: RequestContext) -> bool:
    """The partitions' leaders keep the share state here (PostgreSQL)."""
    return ctx.broker.leader_shares is not None


def from_coordinator(ctx: RequestContext) -> bool:
    """A request the group's coordinator forwarded to this leader (in an Envelope)."""
    return ctx.session is not None and ctx.session.forwarded_principal is not None


async def read_summary(ctx: RequestContext, group_id: str, keys: Iterable[PartitionKey], limiter: Any,
                       ) -> tuple[dict[PartitionKey, SharePartition], dict[PartitionKey, int]]:
    """The group's share-partitions among ``keys`` (existing partitions) as their logs hold them,
    and their committed ends."""
    broker = ctx.broker
    assert broker.leader_shares is not None
    ids = {(broker.topics[topic].meta.topic_id, index): (topic, index) for topic, index in keys}
    return await trio.to_thread.run_sync(group_summary, broker.storage, broker.leader_shares.config, group_id, ids,
                                         limiter=limiter)


def every_partition(ctx: RequestContext) -> list[PartitionKey]:
    """Every partition of every topic but the internal ones (a group may have state on any)."""
    return [(name, index) for name, topic in ctx.broker.topics.items() if name not in INTERNAL_TOPICS
            for index in range(len(topic.partitions))]


async def forget_group(ctx: RequestContext, group_id: str, limiter: Any) -> Errors:
    """DeleteGroups of an empty share group: its state goes from every partition's share-state log
    first (the topics found in them, by their leaders); the first leader's failure, else NONE."""
    states, _ = await read_summary(ctx, group_id, every_partition(ctx), limiter)
    forgotten = await forget_on_leaders(ctx, group_id, sorted({topic for topic, _ in states}), limiter)
    failures = [e for e in forgotten.values() if e not in (Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION)]
    return failures[0] if failures else Errors.NONE


def by_leader(ctx: RequestContext, keys: Iterable[PartitionKey]) -> tuple[list[PartitionKey], dict[int, list[PartitionKey]],
                                                                          list[PartitionKey]]:
    """The partitions led here, those led by another broker (by its node id), and those whose
    leader is unknown or unreachable."""
    broker = ctx.broker
    local: list[PartitionKey] = []
    remote: dict[int, list[PartitionKey]] = defaultdict(list)
    lost: list[PartitionKey] = []
    for topic, index in keys:
        try:
            broker.partition(topic, index)
            local.append((topic, index))
            continue
        except KafkaError:
            pass
        meta = broker.topics[topic].meta
        leader = broker.cluster.leader(meta.topic_id, index, meta.assigned(index))
        node = broker.cluster.node(leader)
        if leader == broker.cluster.self_id or node is None or node.port == 0:
            lost.append((topic, index))
        else:
            remote[leader].append((topic, index))
    return local, dict(remote), lost


def touch(ctx: RequestContext, keys: Iterable[PartitionKey]) -> None:
    """Partitions whose share-state log this request wrote: a write refused because the partition
    moved meanwhile fails the request (as for a moved partition's records)."""
    for key in keys:
        try:
            ctx.shares_touched.append(ctx.broker.partition(*key))
        except KafkaError:
            pass


async def ask_leaders(ctx: RequestContext, requests: dict[int, Request], response_cls: type[R]) -> dict[int, R | None]:
    """Each leader's answer to its request, forwarded as the client's in an Envelope (None: not
    reached)."""
    answers: dict[int, R | None] = {}

    async def ask(leader: int, request: Request) -> None:
        node = ctx.broker.cluster.node(leader)
        header = RequestHeader(request_api_key=request.API_KEY, request_api_version=ctx.api_version,
                               correlation_id=0, client_id=ctx.client_id)
        try:
            if node is None:
                raise OSError(f"node {leader} is not known")
            envelope = wrap_request(header, request, ctx.principal, ctx.client_host)
            answer = await call(node, envelope, ENVELOPE_VERSION, EnvelopeResponse, ctx.broker.cluster.self_id)
            answers[leader] = decode_response(unwrap_response(answer), request, ctx.api_version, response_cls)
        except (OSError, trio.TooSlowError, ProtocolError, ValueError) as exc:
            log.info("share-group offsets: leader %d could not be asked (%s)", leader, exc)
            answers[leader] = None

    async with trio.open_nursery() as nursery:
        for leader, request in requests.items():
            nursery.start_soon(ask, leader, request)
    return answers


def is_led(ctx: RequestContext, topic: str, index: int) -> bool:
    try:
        ctx.broker.partition(topic, index)
    except KafkaError:
        return False
    return True


def forget_here(ctx: RequestContext, group_id: str, topic: str, indexes: list[int]) -> Errors:
    """The group's state of ``topic``'s partitions led here goes (``LeaderShares.delete``)."""
    assert ctx.broker.leader_shares is not None
    try:
        error = ctx.broker.leader_shares.delete(group_id, topic, indexes)
    except KafkaError as exc:
        return exc.error
    touch(ctx, [(topic, index) for index in indexes])
    return error


async def forget_on_leaders(ctx: RequestContext, group_id: str, topics: Iterable[str],
                            limiter: Any) -> dict[str, Errors]:
    """Each topic's share-partitions of the group forgotten by their leaders (here, or asked in a
    DeleteShareGroupOffsets): NONE when one was, a leader's failure, else UNKNOWN_TOPIC_OR_PARTITION."""
    broker = ctx.broker
    found: dict[str, list[Errors]] = {topic: [] for topic in topics}  # a topic unknown: none found
    local, remote, lost = by_leader(ctx, [(topic, index) for topic in found if topic in broker.topics
                                          for index in range(len(broker.topics[topic].partitions))])
    await read_ahead(ctx, local, limiter)
    for topic in dict.fromkeys(topic for topic, _ in local):
        found[topic].append(forget_here(ctx, group_id, topic, [i for t, i in local if t == topic]))
    for topic, _ in lost:
        found[topic].append(Errors.COORDINATOR_NOT_AVAILABLE)
    asked = {leader: list(dict.fromkeys(topic for topic, _ in keys)) for leader, keys in remote.items()}
    answers = await ask_leaders(ctx, {
        leader: DeleteShareGroupOffsetsRequest(group_id=group_id, topics=[
            DeleteShareOffsetsRequestTopic(topic_name=topic) for topic in names]) for leader, names in asked.items()},
        DeleteShareGroupOffsetsResponse)
    for leader, names in asked.items():
        answer = answers.get(leader)
        said = {t.topic_name: Errors(t.error_code) for t in answer.responses} if answer is not None else {}
        for topic in names:
            found[topic].append(said.get(topic, Errors.COORDINATOR_NOT_AVAILABLE))
    return {topic: _combined(answers_) for topic, answers_ in found.items()}


def _combined(answers: list[Errors]) -> Errors:
    """A topic's answer from its partitions' leaders: NONE when one forgot state of the group,
    a leader's failure first, else UNKNOWN_TOPIC_OR_PARTITION (the group had none of it)."""
    if Errors.NONE in answers:
        return Errors.NONE
    failures = [error for error in answers if error is not Errors.UNKNOWN_TOPIC_OR_PARTITION]
    return failures[0] if failures else Errors.UNKNOWN_TOPIC_OR_PARTITION


async def stable_ends(ctx: RequestContext, keys: Iterable[PartitionKey]) -> dict[PartitionKey, int]:
    """The last stable offsets of those of ``keys`` led by other brokers, as their leaders answer
    a read_committed ListOffsets (one request per leader, at once); a leader that cannot be
    reached, or answers an error, leaves its partitions out."""
    broker = ctx.broker
    _, remote, _ = by_leader(ctx, keys)
    ends: dict[PartitionKey, int] = {}

    async def ask(leader: int, led: list[PartitionKey]) -> None:
        node = broker.cluster.node(leader)
        topics: dict[str, list[int]] = defaultdict(list)
        for topic, index in led:
            topics[topic].append(index)
        request = ListOffsetsRequest(replica_id=-1, isolation_level=READ_COMMITTED, topics=[
            ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=i, timestamp=LATEST)
                                                     for i in indexes]) for topic, indexes in topics.items()])
        try:
            if node is None:
                raise OSError(f"node {leader} is not known")
            response = await call(node, request, LIST_OFFSETS_VERSION, ListOffsetsResponse, broker.cluster.self_id)
        except (OSError, trio.TooSlowError, ValueError, ProtocolError) as exc:
            log.info("the last stable offsets of node %d's partitions could not be read: %s", leader, exc)
            return
        for answered in response.topics:
            for partition in answered.partitions:
                if partition.error_code == Errors.NONE and partition.offset >= 0:
                    ends[(answered.name, partition.partition_index)] = partition.offset

    async with trio.open_nursery() as nursery:
        for leader, led in remote.items():
            nursery.start_soon(ask, leader, led)
    return ends
