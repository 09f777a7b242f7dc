"""Storage engines: where the broker's partitions, catalog and coordinator state are kept.

``native`` (the embedded default): segment files and metadata documents in ``--data-dir``.
``postgresql``: the same state in a PostgreSQL database (``--storage postgresql://...``), so that a
broker holds nothing the database does not (see ``postgres/``). The broker asks its engine for
documents, coordinator logs, producer id blocks and partition logs; the server's flusher asks it
to make a round's writes durable (``sync``). Handlers never see which engine runs. Who this broker
is in a cluster (heartbeats, claims, shard hand-over, catalog acknowledgements) is not storage:
``open_storage`` returns it beside the engine, as a ``ClusterMembership`` (broker/membership.py).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Protocol

from ..durable.flush import FlushItem
from ..durable.log import DurableLog
from ..durable.work import BlockingWork, Document
from ..log.config import LogConfig
from ..log.partition import Partition
from ..membership import AloneMembership, ClusterMembership
from ..producer_ids import BlockSource
from .errors import CoordinationLost, DatabaseInUse, StorageConflict, StorageError, StorageUnavailable

log = logging.getLogger(__name__)

# A database not reachable at start (starting up, restarting, failing over): tried again every
# START_RETRY_S for START_WAIT_S before the broker gives up.
START_WAIT_S = 60.0
START_RETRY_S = 1.0


class Storage(Protocol):
    kind: str
    acknowledge_after_commit: bool  # every acknowledged write waits for its round's commit
    descriptors_per_partition: int  # open files an idle partition holds
    closes_in_parallel: bool  # Broker.close may close partitions on several threads at once
    coordinator_shards: int  # how many coordinator shards group and transactional ids hash to

    def document(self, name: str) -> Document: ...

    def coordinator_log(self, name: str, work: BlockingWork, shard: int = 0) -> DurableLog | Any: ...

    def share_state_log(self, partition: Any, work: BlockingWork) -> Any:
        """A led partition's share-state log (PostgreSQL: share partitions live with the leader)."""
        ...

    def producer_id_blocks(self) -> BlockSource: ...

    def cluster_id(self, node_id: int) -> str: ...

    def open_partition(
        self, topic_id: Any, topic: str, index: int, config: LogConfig, now_ms: int, work: BlockingWork, *, new: bool
    ) -> Partition:
        """The partition: a ``Partition`` holding this engine's ``EngineLog`` (``open_partition``)."""

    def discard_partition(self, topic_id: Any, topic: str, index: int) -> None:
        """Remove what a partition that failed to open (a topic being created) left behind."""
        ...

    def drop_partition(self, topic_id: Any, index: int, work: BlockingWork) -> None:
        """DeleteTopics, for a partition another broker leads: its data goes with a job."""
        ...

    def sync(self, pending: list[FlushItem]) -> None:
        """Worker thread: make what a round captured durable (fsyncs, or one database commit)."""
        ...

    def committed_decisions(self, producer_ids: list[int]) -> dict[int, int]:
        """Worker thread: of these producers, those whose transaction a coordinator has decided to
        commit (producer id -> the epoch of its batches), for leaders still waiting for a marker."""
        ...

    def close(self) -> None: ...


def is_native(url: str | None) -> bool:
    """Whether ``url`` names the native log (kept in the data directory), not a database."""
    return url is None or url in ("", "native")


def open_storage(
    url: str | None, data_dir: Path, *, standby: bool = False, node: tuple[int, str, int] | None = None,
    assign_node_id: bool = False, start_wait_s: float = START_WAIT_S,
) -> tuple[Storage, ClusterMembership]:
    """The engine a ``--storage`` value names (None: the native log in ``data_dir``); ``standby``:
    wait for the database's serving broker to stop instead of failing; ``node``: this broker's
    node id and advertised address, for a shared store's registry of brokers; ``assign_node_id``:
    a shared store picks the node id (``assigned_node_id``), the native log keeps ``node``'s;
    ``start_wait_s``: how long a database that is not up yet is waited for. Returned with the
    engine: the cluster membership it implements (the native log: a broker alone)."""
    if url is None or is_native(url):
        from .native import NativeStorage

        return NativeStorage(data_dir), AloneMembership()
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres.membership import PgMembership
        from .postgres.store import PostgresStorage

        deadline = time.monotonic() + start_wait_s
        while True:
            try:
                storage = PostgresStorage(url, standby=standby, node=node, assign_node_id=assign_node_id)
                return storage, PgMembership(storage)
            except StorageUnavailable as exc:
                # A database starting up, restarting or failing over: wait for it, as a Kafka
                # broker waits for its controllers, rather than exit.
                if not exc.transient or time.monotonic() >= deadline:
                    raise
                log.warning("%s; trying again (for up to %.0f s from start)", exc, start_wait_s)
                time.sleep(START_RETRY_S)
    raise ValueError(f"unknown storage {url!r}: expected postgresql://USER[:PASSWORD]@HOST[:PORT]/DB")


__all__ = [
    "CoordinationLost", "DatabaseInUse", "Storage", "StorageConflict", "StorageError", "StorageUnavailable",
    "is_native", "open_storage",
]
