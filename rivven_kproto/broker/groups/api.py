"""What the group coordinator takes and returns: plain values, independent of wire versions."""

from __future__ import annotations

from dataclasses import dataclass

from rivven_kproto.codec.errors import Errors

from .group import Protocols
from .offsets import CommittedOffset


@dataclass(frozen=True)
class JoinParams:
    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    require_known_member_id: bool = True  # JoinGroup v4+ without an instance id


@dataclass(frozen=True)
class JoinedMember:
    member_id: str
    instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error: Errors
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinedMember, ...] = ()  # the leader's copy only


@dataclass(frozen=True)
class SyncParams:
    group_id: str
    generation_id: int
    member_id: str
    instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class SyncResult:
    error: Errors
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


Result = JoinResult | SyncResult


@dataclass(frozen=True)
class Awaiting:
    """The request is parked: ``take_result(ticket)`` answers once the coordinator completes it."""

    group_id: str
    ticket: int
    deadline_ms: int  # a safety net: the coordinator's own timers complete it well before


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    instance_id: str | None


@dataclass(frozen=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True)
class FetchedOffset:
    partition: int
    committed: CommittedOffset | None  # None: nothing committed (offset -1)
    error: Errors = Errors.NONE  # UNSTABLE_OFFSET_COMMIT: a transaction's offset is pending


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[DescribedMember, ...]


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True)
class ConsumerHeartbeat:
    """A ConsumerGroupHeartbeat: ``None`` fields did not change since the member's last heartbeat."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: dict[str, frozenset[int]] | None = None  # by topic name; None: not sent
    client_id: str = ""
    client_host: str = ""
    version: int = 1
    principal: str = "User:ANONYMOUS"  # whose Describe ACLs a regex subscription resolves with


@dataclass(frozen=True)
class ConsumerHeartbeatResult:
    error: Errors
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: dict[str, frozenset[int]] | None = None  # None: unchanged, not sent
    message: str | None = None
