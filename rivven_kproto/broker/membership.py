"""Cluster membership, apart from storage: who this broker is and what it may answer for.

``Storage`` keeps partitions, coordinator logs and metadata documents. ``ClusterMembership``
knows this broker's node identity, its liveness (a heartbeat that returns a ``Pulse``), whether
its claims on partitions still hold, which coordinator shards it hands over, and which brokers
applied a version of the topic catalog. A broker on its own (the native log) has
``AloneMembership``, which does nothing: it leads and coordinates everything, nobody waits for it.
PostgreSQL implements both (``storage/postgres``: brokers sharing a database).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .cluster import Node
from .log.partition import Partition


@dataclass(frozen=True)
class Pulse:
    """What a shared store says at a heartbeat: the live brokers, the coordinator, the catalog,
    and a digest of every other document (ACLs, SCRAM credentials, dynamic broker configs), so
    that a broker re-reads only what the controller changed since it last looked."""

    nodes: tuple[Node, ...]
    coordinator_id: int | None
    catalog: bytes | None  # the topic catalog document as stored now
    documents: dict[str, str] = field(default_factory=dict)  # name -> digest of its stored bytes
    shard_owners: dict[int, int] = field(default_factory=dict)  # coordinator shard -> the node holding its lock
    # Brokers gone from the live set whose session has not expired yet: still listed to clients
    # (as Kafka lists a broker until its session times out), leading and coordinating nothing.
    departed: tuple[Node, ...] = ()


class ClusterMembership(Protocol):
    assigned_node_id: int | None  # the node id the cluster gave this broker (None: the configured one)
    heartbeat_interval_s: float | None  # how often ``heartbeat`` runs (None: never)
    # After this long without a heartbeat the others count this broker dead and take its claims (None: alone).
    session_timeout_s: float | None

    def heartbeat(self, host: str, port: int, peer: tuple[str, int] | None = None) -> Pulse | None:
        """Worker thread: tell the cluster this broker (advertised at host:port, its inter-broker
        listener at ``peer``) is alive; answers with the brokers serving it (None: this broker is alone)."""
        ...

    def claims_lost(self, logs: list[Partition]) -> list[Partition]:
        """Worker thread: those of these logs another writer claimed since they opened."""
        ...

    def release_shard(self, shard: int) -> None:
        """Worker thread: this broker handed the coordinator shard over (its writes are durable)."""
        ...

    def acknowledge_catalog(self, digest: str) -> None:
        """Worker thread: this broker applied the topic catalog with this digest."""
        ...

    def catalog_lagging(self, digests: list[str]) -> list[int]:
        """Worker thread: live brokers that have applied none of the catalogs with these digests yet."""
        ...

    def close(self) -> None:
        """Leave the cluster (before the storage closes)."""
        ...


class AloneMembership:
    """A broker on its own: it leads every partition and coordinates every shard, for good."""

    assigned_node_id: int | None = None  # the configured node id (default 0) stands
    heartbeat_interval_s: float | None = None  # nobody to tell
    session_timeout_s: float | None = None  # nobody takes anything from it

    def heartbeat(self, host: str, port: int, peer: tuple[str, int] | None = None) -> Pulse | None:
        return None

    def claims_lost(self, logs: list[Partition]) -> list[Partition]:
        return []

    def release_shard(self, shard: int) -> None:
        """Never called: the one shard is never handed over."""

    def acknowledge_catalog(self, digest: str) -> None:
        """Nobody waits for it."""

    def catalog_lagging(self, digests: list[str]) -> list[int]:
        return []

    def close(self) -> None:
        pass
