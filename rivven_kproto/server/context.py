"""What a handler may see: the broker, the config, the clock reading and the caller."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.groups import GroupCoordinator
from rivven_kproto.broker.groups.txn_guards import Guard
from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.broker.log.region import BatchRegion
from rivven_kproto.broker.log.validation import RecordCheck
from rivven_kproto.broker.security.acls import CLUSTER_NAME, Operation, ResourceType
from rivven_kproto.broker.security.authorization_rules import Check, Source
from rivven_kproto.broker.txn.coordinator import TransactionCoordinator
from rivven_kproto.codec.connection import RequestEvent
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.metadata import MetadataResponseTopic
from rivven_kproto.codec.schema import Response

from .session import Session

PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class NoResponse:
    """What a handler returns when Kafka sends nothing back (Produce with acks=0); ``unsent`` is
    the response it would have been (its error codes still count in the metrics)."""

    unsent: object = None


@dataclass(frozen=True)
class Redispatch:
    """What a handler returns when its answer is another request's (an Envelope's inner one):
    dispatched as the client ``principal`` at ``client_host``; ``answer`` wraps that answer's frame."""

    event: RequestEvent
    principal: str
    client_host: str
    answer: Callable[[bytes | None], Response]


@dataclass(frozen=True)
class TxnVerdict:
    """The coordinator's word on a producer's first transactional batch on a partition led here
    (server/handlers/_txn_verification.py), valid while ``guard`` is still the producer's."""

    error: Errors
    guard: object
    transactional_id: str  # whose producer the coordinator confirmed (or refused)


@dataclass
class RequestContext:
    broker: Broker
    config: BrokerConfig
    now_ms: int
    client_id: str | None = None
    client_host: str = ""  # Kafka's form, "/127.0.0.1" (DescribeGroups reports it per member)
    api_version: int = 0  # the request's version (a ``prepare`` may need it; ``handle`` is given it)
    # Filled by the server after an append so that waiters (fetch long-poll, fsync) can react.
    appended: bool = False
    # Logs this request wrote to, for the durability policy (fsync, flush.messages).
    touched: list[Partition] = field(default_factory=list)
    # Partitions whose share-partition state this request changed (its share-state log written
    # with the round): refused because the partition moved, the request is not answered as done.
    shares_touched: list[Partition] = field(default_factory=list)
    # A request its group's coordinator answered (forwarded there by ``prepare``): the answer.
    forwarded_answer: Response | None = None
    # Answer only once this request's writes are durable, when the fsync policy says so (acks != 0).
    sync_before_answer: bool = False
    # Produce: each partition's batch validated (and recompressed) before the handler runs, or why not.
    prepared: dict[PartitionKey, RecordCheck | KafkaError] = field(default_factory=dict)
    # Fetch: reads of sealed segments done on a worker thread before the handler runs, by
    # partition: (fetch offset, whole batches read).
    prefetched: dict[PartitionKey, tuple[int, bytes | BatchRegion]] = field(default_factory=dict)
    # Fetch may answer with file regions (sent by ``sendfile`` on a plain socket, read a chunk at a
    # time on TLS): a client connection, which sends the reply with ``sending.send_reply``.
    zero_copy: bool = False
    # ListOffsets by timestamp, looked up by ``prepare`` on a worker thread (PostgreSQL engine).
    looked_up: dict[PartitionKey, tuple[int, int] | None | OSError] = field(default_factory=dict)
    # Produce on a leader that does not coordinate: the coordinator's verdicts on first
    # transactional batches, by partition.
    txn_verdicts: dict[PartitionKey, TxnVerdict] = field(default_factory=dict)
    # TxnOffsetCommit whose transaction another broker coordinates: its answer to verifying (V1)
    # or adding (V2) the group's shard in the transaction, and the guard it was asked under (see
    # handlers/_txn_verification.offsets_at_coordinator).
    txn_offsets_added: Errors | None = None
    txn_offsets_guard: Guard | None = None
    # The connection's listener and client identity (None: a request outside any connection).
    session: Session | None = None
    # Metadata naming many topics: the answers by name, built by ``prepare`` a slice per event-loop
    # turn so that other clients are served meanwhile (see handlers/metadata.py).
    metadata_answers: dict[str, MetadataResponseTopic] = field(default_factory=dict)
    # The authorizer's decisions made for this request: Produce asks about a topic once per
    # partition, twice (prepare, then handle); Kafka decides once per topic.
    decisions: dict[tuple[Operation, ResourceType, str], bool] = field(default_factory=dict)

    @property
    def principal(self) -> str:
        return self.session.principal if self.session is not None else "User:ANONYMOUS"

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """The authorizer's decision for this connection's principal and host (always yes without one)."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        key = (operation, resource_type, name)
        decision = self.decisions.get(key)
        if decision is None:
            decision = self.decisions[key] = authorizer.authorize(
                self.principal, self.client_host.lstrip("/"), operation, resource_type, name)
        return decision

    def permits(self, check: Check, name: str = CLUSTER_NAME) -> bool:
        """A check of the authorization table (broker/security/authorization_rules.py) for ``name``,
        or one of its alternatives (e.g. Create on the Cluster instead of on the topic)."""
        if self.allowed(check.operation, check.resource_type, name):
            return True
        for grant in check.alternatives:
            if grant.source is Source.ANY_TOPIC:
                if self.allowed_on_any_topic(grant.operation):
                    return True
            elif self.allowed(grant.operation, grant.resource_type, CLUSTER_NAME if grant.resource_type == ResourceType.CLUSTER else name):
                return True
        return False

    def refusal(self, check: Check, name: str = CLUSTER_NAME) -> Errors | None:
        """The table's error for a refused check (None when allowed): handlers answer with it."""
        if self.permits(check, name):
            return None
        assert check.error is not None, f"{check.label} filters: use permits()"
        return check.error

    def authorized_operations(self, resource_type: ResourceType, name: str, operations: tuple[Operation, ...]) -> int:
        """Kafka's ``authorized_operations`` bit set: bit ``op`` for each operation this client may do."""
        field = 0
        for operation in operations:
            if self.allowed(operation, resource_type, name):
                field |= 1 << operation
        return field

    def allowed_on_any_topic(self, operation: Operation) -> bool:
        authorizer = self.broker.authorizer
        return authorizer is None or authorizer.authorize_any_topic(self.principal, self.client_host.lstrip("/"), operation)

    @property
    def advertised(self) -> tuple[str, int]:
        """The address of this connection's listener, as Kafka advertises per listener name."""
        return self.session.advertised if self.session is not None else self.config.advertised

    def brokers(self) -> list[tuple[int, str, int]]:
        """The brokers clients are told of (node id, host, port): the live ones and those whose
        session has not expired yet; this one at its connection's listener address."""
        own = self.config.node_id
        return [(node.node_id, *(self.advertised if node.node_id == own else (node.host, node.port)))
                for node in self.broker.cluster.listed]

    def groups_for(self, group_id: str) -> GroupCoordinator:
        """The coordinator of this group on this broker; NOT_COORDINATOR when its shard is another's."""
        coordinator = self.broker.group_coordinator(group_id)
        if coordinator is None:
            raise KafkaError(Errors.NOT_COORDINATOR, f"node {self.config.node_id} does not coordinate {group_id!r}")
        return coordinator

    def txn_for(self, transactional_id: str) -> TransactionCoordinator:
        """The coordinator of this transactional id on this broker; NOT_COORDINATOR otherwise."""
        coordinator = self.broker.txn_coordinator(transactional_id)
        if coordinator is None:
            raise KafkaError(Errors.NOT_COORDINATOR,
                             f"node {self.config.node_id} does not coordinate {transactional_id!r}")
        return coordinator

    def address_of(self, node_id: int) -> tuple[str, int] | None:
        if node_id == self.config.node_id:
            return self.advertised
        node = self.broker.cluster.node(node_id)
        return (node.host, node.port) if node is not None else None
