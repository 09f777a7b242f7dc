"""Membership of a consumer group with Kafka's classic protocol, as kafka-console-consumer's ``--group``.

The member joins (JoinGroup, retried with the member id the coordinator assigns, KIP-394), the
leader range-assigns every member's subscribed topics (Kafka's ``range`` assignor, so members of
any Kafka client share the partitions), everyone gets its partitions from SyncGroup, and
heartbeats tell it when to rejoin. Offsets are committed with the generation, so a commit from a
member the group has moved past is refused (Kafka's CommitFailed), never applied.

Subscription and assignment bytes are Kafka's ConsumerProtocolSubscription/Assignment v0:
``version:int16 [topic:string] user_data:bytes`` and ``version:int16 [topic:string
[partition:int32]] user_data:bytes``; newer versions only append fields, so v0 readers read them.
"""

from __future__ import annotations

import logging
import struct
from collections import defaultdict
from dataclasses import dataclass

import trio

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from rivven_kproto.codec.messages.join_group import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
)
from rivven_kproto.codec.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberIdentity
from rivven_kproto.codec.messages.sync_group import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from rivven_kproto.net.errors import ClientError, check

from .client import RETRY_BACKOFF_S, KafkaClient
from .groups import CONSUMER_PROTOCOL, TP, commit_offsets, coordinator_call, decode_assignment

log = logging.getLogger(__name__)

RANGE = "range"
SESSION_TIMEOUT_MS = 45_000  # Kafka's consumer defaults
REBALANCE_TIMEOUT_MS = 300_000  # max.poll.interval.ms: how long the others may take to rejoin
HEARTBEAT_INTERVAL_S = 3.0
# Member is out of date: forget the generation (and, when the coordinator forgot us, the id) and rejoin.
REJOIN = {Errors.REBALANCE_IN_PROGRESS, Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID,
          Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE}
FORGOTTEN = {Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def encode_subscription(topics: list[str]) -> bytes:
    parts = [_I16.pack(0), _I32.pack(len(topics))]
    for topic in topics:
        name = topic.encode()
        parts += [_I16.pack(len(name)), name]
    return b"".join([*parts, _I32.pack(-1)])  # null user data


def decode_subscription(data: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription (any version); empty when unreadable."""
    try:
        pos = _I16.size
        (count,) = _I32.unpack_from(data, pos)
        pos += _I32.size
        topics = []
        for _ in range(max(count, 0)):
            (length,) = _I16.unpack_from(data, pos)
            pos += _I16.size
            if length < 0 or pos + length > len(data):
                return []
            topics.append(data[pos : pos + length].decode())
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return []


def encode_assignment(partitions: list[TP]) -> bytes:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(partitions):
        by_topic[topic].append(partition)
    parts = [_I16.pack(0), _I32.pack(len(by_topic))]
    for topic, indexes in by_topic.items():
        name = topic.encode()
        parts += [_I16.pack(len(name)), name, _I32.pack(len(indexes)), *(_I32.pack(i) for i in indexes)]
    return b"".join([*parts, _I32.pack(-1)])


def range_assign(subscriptions: dict[str, list[str]], partition_counts: dict[str, int]) -> dict[str, list[TP]]:
    """Kafka's RangeAssignor: per topic, its subscribers in member-id order take consecutive ranges,
    the first ``partitions % members`` one partition more."""
    assignment: dict[str, list[TP]] = {member: [] for member in subscriptions}
    for topic, count in sorted(partition_counts.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            size = share + (1 if index < extra else 0)
            assignment[member] += [(topic, p) for p in range(start, start + size)]
            start += size
    return assignment


@dataclass
class Generation:
    generation_id: int
    member_id: str
    partitions: list[TP]


class GroupMembership:
    """One member of ``group_id`` subscribed to ``topics``: join, heartbeat, commit, leave."""

    def __init__(
        self,
        client: KafkaClient,
        group_id: str,
        topics: list[str],
        *,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS,
        heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
    ) -> None:
        self.client = client
        self.group_id = group_id
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_s
        self.member_id = ""
        self.generation: Generation | None = None

    @property
    def _join_timeout_s(self) -> float:
        """JoinGroup is held until every member rejoined or the rebalance timed out."""
        return self.rebalance_timeout_ms / 1000 + self.client.timeout

    async def join(self) -> Generation:
        """Join (or rejoin) and return this generation's assignment, retrying until it is stable."""
        self.generation = None
        while True:
            joined = await self._join_group()
            if joined is None:
                continue
            assignments: list[SyncGroupRequestAssignment] = []
            if joined.leader == joined.member_id:
                assignments = await self._assign(joined)
            partitions = await self._sync(joined, assignments)
            if partitions is not None:
                self.generation = Generation(joined.generation_id, self.member_id, partitions)
                log.info("joined group %s as %s (generation %d): %s", self.group_id, self.member_id,
                         joined.generation_id, partitions)
                return self.generation

    async def _join_group(self) -> JoinGroupResponse | None:
        def build(version: int) -> JoinGroupRequest:
            return JoinGroupRequest(
                group_id=self.group_id,
                session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                member_id=self.member_id,
                protocol_type=CONSUMER_PROTOCOL,
                protocols=[JoinGroupRequestProtocol(name=RANGE, metadata=encode_subscription(self.topics))],
            )

        _, response = await coordinator_call(
            self.client, self.group_id, JoinGroupRequest, build, JoinGroupResponse, lambda r: r.error_code,
            timeout=self._join_timeout_s,
        )
        error = Errors.for_code(response.error_code)
        if error == Errors.MEMBER_ID_REQUIRED:  # KIP-394: rejoin with the id the coordinator chose
            self.member_id = response.member_id
            return None
        if error in REJOIN:
            if error in FORGOTTEN:
                self.member_id = ""
            await trio.sleep(RETRY_BACKOFF_S)
            return None
        check(error, context=f"JoinGroup for group {self.group_id}")
        self.member_id = response.member_id
        return response

    async def _assign(self, joined: JoinGroupResponse) -> list[SyncGroupRequestAssignment]:
        if joined.protocol_name != RANGE:
            raise ClientError(Errors.INCONSISTENT_GROUP_PROTOCOL, f"group {self.group_id} chose {joined.protocol_name!r}")
        subscriptions = {member.member_id: decode_subscription(bytes(member.metadata)) for member in joined.members}
        wanted = sorted({topic for topics in subscriptions.values() for topic in topics})
        metadata = await self.client.metadata(wanted)
        counts = {name: len(info.partitions) for name, info in metadata.topics.items() if info.error == 0}
        plan = range_assign(subscriptions, counts)
        return [SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(p)) for m, p in plan.items()]

    async def _sync(self, joined: JoinGroupResponse, assignments: list[SyncGroupRequestAssignment]) -> list[TP] | None:
        def build(version: int) -> SyncGroupRequest:
            return SyncGroupRequest(
                group_id=self.group_id,
                generation_id=joined.generation_id,
                member_id=self.member_id,
                protocol_type=CONSUMER_PROTOCOL,
                protocol_name=joined.protocol_name,
                assignments=assignments,
            )

        _, response = await coordinator_call(
            self.client, self.group_id, SyncGroupRequest, build, SyncGroupResponse, lambda r: r.error_code,
            timeout=self._join_timeout_s,
        )
        error = Errors.for_code(response.error_code)
        if error in REJOIN:
            if error in FORGOTTEN:
                self.member_id = ""
            return None
        check(error, context=f"SyncGroup for group {self.group_id}")
        return decode_assignment(bytes(response.assignment or b"")) or []

    async def heartbeat_until_rebalance(self) -> Errors:
        """Heartbeat every interval; return the error that asks this member to rejoin."""
        generation = self.generation
        assert generation is not None, "join first"

        def build(version: int) -> HeartbeatRequest:
            return HeartbeatRequest(
                group_id=self.group_id, generation_id=generation.generation_id, member_id=generation.member_id
            )

        while True:
            await trio.sleep(self.heartbeat_interval_s)
            _, response = await coordinator_call(
                self.client, self.group_id, HeartbeatRequest, build, HeartbeatResponse, lambda r: r.error_code
            )
            error = Errors.for_code(response.error_code)
            if error == Errors.NONE:
                continue
            if error in REJOIN:
                if error in FORGOTTEN:
                    self.member_id = ""
                log.info("group %s: %s, rejoining", self.group_id, error.name)
                return error
            check(error, context=f"Heartbeat for group {self.group_id}")

    async def commit(self, offsets: dict[TP, int]) -> bool:
        """Commit in this generation; False (nothing committed) when the group has moved on."""
        generation = self.generation
        if generation is None or not offsets:
            return generation is not None
        try:
            await commit_offsets(
                self.client, self.group_id, offsets, generation_id=generation.generation_id,
                member_id=generation.member_id,
            )
        except ClientError as exc:
            if exc.error not in REJOIN:
                raise
            log.warning("group %s rebalanced before offsets %s were committed: %s", self.group_id, offsets, exc)
            return False
        return True

    async def leave(self) -> None:
        """LeaveGroup, so the others get this member's partitions now, not after its session times out."""
        if not self.member_id:
            return
        member_id, self.member_id, self.generation = self.member_id, "", None

        def build(version: int) -> LeaveGroupRequest:
            if version >= 3:
                return LeaveGroupRequest(group_id=self.group_id, members=[MemberIdentity(member_id=member_id)])
            return LeaveGroupRequest(group_id=self.group_id, member_id=member_id)

        _, response = await coordinator_call(
            self.client, self.group_id, LeaveGroupRequest, build, LeaveGroupResponse, lambda r: r.error_code
        )
        if response.error_code not in (Errors.NONE, Errors.UNKNOWN_MEMBER_ID):
            log.warning("leaving group %s: %s", self.group_id, Errors.for_code(response.error_code).name)
