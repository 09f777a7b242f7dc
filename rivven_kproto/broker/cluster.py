"""Who serves what when several brokers share one store: pure functions of the live brokers.

Every broker computes the same answer from the same list of live brokers, so nothing is
negotiated: a partition is led by the live broker with the highest rendezvous score for it
(highest-random-weight hashing: when a broker joins or leaves, only the partitions it gains or
loses move), and its replicas are the next best-scoring ones. A partition created with an explicit
replica assignment is led by the first live broker of its assignment instead, its replicas listed
in the assignment's order (the data is in the store either way: no broker copies it). The controller (sole writer of the
topic catalog, ACLs, credentials and configs) is the broker holding the store's coordinator lease.
Group and transactional ids are coordinated by shards (Kafka's partitions of ``__consumer_offsets``
and ``__transaction_state``): a key's shard is a stable hash of it (``shard_of``), and a shard is
served by the broker holding its lock in the store; the live broker with the best rendezvous score
for a shard (``preferred_for_shard``) takes it when it is free, and its holder hands it over. A
broker on its own (the native log) is a cluster of one that leads and coordinates everything.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import xxhash


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str  # the advertised address clients are told
    port: int
    # The address of its inter-broker listener, where the other brokers connect (None: host, port).
    peer_host: str | None = None
    peer_port: int | None = None

    @property
    def peer_address(self) -> tuple[str, int]:
        if self.peer_host is None or self.peer_port is None:
            return self.host, self.port
        return self.peer_host, self.peer_port


@dataclass(frozen=True)
class ClusterView:
    """The live brokers (by node id) as this broker last saw them, and which one coordinates."""

    self_id: int
    nodes: tuple[Node, ...]
    coordinator_id: int | None
    # Coordinator shards: how many the store has, and which node holds each (absent: nobody).
    shard_count: int = 1
    shard_owners: Mapping[int, int] = field(default_factory=dict)
    # Brokers that left the live set but whose session has not expired: listed to clients only.
    departed: tuple[Node, ...] = ()

    @classmethod
    def alone(cls, node_id: int, host: str, port: int) -> ClusterView:
        return cls(node_id, (Node(node_id, host, port),), node_id, 1, {0: node_id})

    def shard_owner(self, shard: int) -> int | None:
        return self.shard_owners.get(shard)

    def key_owner(self, key: str) -> int | None:
        """The node coordinating this group or transactional id now (None: nobody holds its shard)."""
        return self.shard_owner(shard_of(key, self.shard_count))

    def key_coordinator(self, key: str) -> Node | None:
        """The live broker coordinating this group or transactional id now, if any."""
        owner = self.key_owner(key)
        return self.node(owner) if owner is not None else None

    def ranked_for_shard(self, shard: int) -> list[int]:
        return ranked_for_shard(self.node_ids, shard)

    def preferred_for_shard(self, shard: int) -> int:
        return self.ranked_for_shard(shard)[0]

    def shards_of(self, node_id: int) -> list[int]:
        return sorted(shard for shard, owner in self.shard_owners.items() if owner == node_id)

    @property
    def listed(self) -> tuple[Node, ...]:
        """The brokers Metadata and DescribeCluster name: the live ones and those whose session
        has not expired yet (they lead nothing), by node id."""
        if not self.departed:
            return self.nodes
        return tuple(sorted((*self.nodes, *self.departed), key=lambda n: n.node_id))

    @property
    def node_ids(self) -> tuple[int, ...]:
        return tuple(node.node_id for node in self.nodes)

    @property
    def is_coordinator(self) -> bool:
        return self.coordinator_id == self.self_id

    @property
    def coordinator(self) -> Node | None:
        return self.node(self.coordinator_id) if self.coordinator_id is not None else None

    def node(self, node_id: int) -> Node | None:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        return None

    def ranked(self, topic_id: uuid.UUID, partition: int, assigned: Sequence[int] = ()) -> list[int]:
        """Live node ids for one partition: those of an explicit assignment (``assigned``, in its
        order) first, then the others, best rendezvous score first."""
        if len(self.nodes) == 1:
            return [self.nodes[0].node_id]
        live = self.node_ids
        first = [n for n in assigned if n in live]
        prefix = topic_id.bytes + partition.to_bytes(4, "big")
        rest = sorted((n for n in live if n not in first),
                      key=lambda n: (-xxhash.xxh64_intdigest(prefix + n.to_bytes(4, "big", signed=True)), n))
        return first + rest

    def leader(self, topic_id: uuid.UUID, partition: int, assigned: Sequence[int] = ()) -> int:
        return self.ranked(topic_id, partition, assigned)[0]

    def replicas(self, topic_id: uuid.UUID, partition: int, replication_factor: int,
                 assigned: Sequence[int] = ()) -> list[int]:
        """The leader first, then the next (as many live brokers as the factor asks, at most all)."""
        return self.ranked(topic_id, partition, assigned)[: max(replication_factor, 1)]

    def leads(self, topic_id: uuid.UUID, partition: int, assigned: Sequence[int] = ()) -> bool:
        return self.leader(topic_id, partition, assigned) == self.self_id


def shard_of(key: str, shard_count: int) -> int:
    """The coordinator shard of a group or transactional id: a stable hash (the same on every
    broker and every run, unlike Python's ``hash``), modulo the store's shard count."""
    if shard_count <= 1:
        return 0
    return xxhash.xxh64_intdigest(key.encode("utf-8", "surrogatepass")) % shard_count


def ranked_for_shard(node_ids: tuple[int, ...] | list[int], shard: int) -> list[int]:
    """Node ids, best rendezvous score first, for one coordinator shard (the first takes it)."""
    prefix = b"kproto-coordinator-shard" + shard.to_bytes(4, "big")
    return sorted(node_ids, key=lambda n: (-xxhash.xxh64_intdigest(prefix + n.to_bytes(4, "big", signed=True)), n))


def catalog_digest(catalog: bytes) -> str:
    """Names a version of the topic catalog (brokers acknowledge the one they applied)."""
    return xxhash.xxh64_hexdigest(catalog)
