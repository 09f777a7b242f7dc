"""What OffsetCommit and TxnOffsetCommit share: which partitions reach the group coordinator, and
the answer per partition.

Both answer every partition with the first of: the request-level refusal (the group's, and for a
transaction first the transactional id's), NOT_COORDINATOR when another broker holds the group's
shard, the topic's refusal, UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or a partition beyond
its count; the rest are committed and answer the coordinator's verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from rivven_kproto.broker.groups.api import CommitPartition
from rivven_kproto.broker.security.authorization_rules import Check
from rivven_kproto.codec.errors import Errors

from ..context import RequestContext

Answers = dict[tuple[str, int], Errors]
TopicT = TypeVar("TopicT")
PartitionT = TypeVar("PartitionT")


class _Partition(Protocol):
    @property
    def partition_index(self) -> int: ...
    @property
    def committed_offset(self) -> int: ...
    @property
    def committed_leader_epoch(self) -> int: ...
    @property
    def committed_metadata(self) -> str | None: ...


class _Topic(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[_Partition]: ...


def partitions_to_commit(ctx: RequestContext, group_id: str, topics: Sequence[_Topic], refused: Errors | None,
                         topic_check: Check) -> tuple[Answers, list[CommitPartition]]:
    """The answers already known (refused, not here, unknown) and the partitions left to commit."""
    errors: Answers = {}
    to_commit: list[CommitPartition] = []
    here = ctx.broker.coordinates(group_id)  # not: another broker's shard, NOT_COORDINATOR
    for topic in topics:
        known = ctx.broker.topics.get(topic.name)
        topic_refused = ctx.refusal(topic_check, topic.name)
        for p in topic.partitions:
            if refused is not None:
                errors[(topic.name, p.partition_index)] = refused
            elif not here:
                errors[(topic.name, p.partition_index)] = Errors.NOT_COORDINATOR
            elif topic_refused is not None:
                errors[(topic.name, p.partition_index)] = topic_refused
            elif known is None or not 0 <= p.partition_index < len(known.partitions):
                errors[(topic.name, p.partition_index)] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                to_commit.append(CommitPartition(topic.name, p.partition_index, p.committed_offset,
                                                 p.committed_leader_epoch, p.committed_metadata))
    return errors, to_commit


def record_results(errors: Answers, committed: list[CommitPartition], results: Sequence[Errors]) -> None:
    """The coordinator's verdict, one per committed partition, joins the answers."""
    for commit, error in zip(committed, results, strict=True):
        errors[(commit.topic, commit.partition)] = error


def response_topics(topics: Sequence[_Topic], errors: Answers, topic: Callable[..., TopicT],
                    partition: Callable[..., PartitionT]) -> list[TopicT]:
    """The response's topics in the request's order, each partition with its answer."""
    return [
        topic(
            name=t.name,
            partitions=[partition(partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)])
                        for p in t.partitions],
        )
        for t in topics
    ]
