"""The native engine: segment files and metadata documents in the data directory."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

from ..descriptors import log_file_budget
from ..durable.files import write_atomic
from ..durable.flush import FlushItem, native_items, sync_all
from ..durable.log import DurableLog
from ..durable.work import BlockingWork, Document
from ..file_modes import make_private_dir
from ..log.config import LogConfig
from ..log.descriptor_cache import DescriptorCache
from ..log.directory import DELETED_SUFFIX, remove_deleted
from ..log.native_engine import open_partition
from ..log.partition import Partition
from ..producer_ids import FileBlocks


class NativeStorage:
    kind = "native"
    acknowledge_after_commit = False  # the fsync policy decides
    # Segment files share one bounded descriptor cache (log/descriptor_cache.py): a partition holds none.
    descriptors_per_partition = 0
    closes_in_parallel = True  # partitions share no state but the descriptor cache (locked)
    coordinator_shards = 1  # alone: one shard, whose logs are meta/groups and meta/txn as always

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.meta_dir = data_dir / "meta"
        remove_deleted(data_dir)
        self.files = DescriptorCache(log_file_budget())  # sized now: the server raised the limit first
        make_private_dir(self.meta_dir)

    def document(self, name: str) -> Document:
        return Document(self.meta_dir / name)

    def coordinator_log(self, name: str, work: BlockingWork, shard: int = 0) -> DurableLog:
        return DurableLog(self.meta_dir / name, name, work)

    def share_state_log(self, partition: Any, work: BlockingWork) -> DurableLog:
        """Not used: on the native log the group's share coordinator keeps its share partitions."""
        raise NotImplementedError("the native log keeps share partitions with the group's coordinator")

    def producer_id_blocks(self) -> FileBlocks:
        return FileBlocks(self.meta_dir)

    def cluster_id(self, node_id: int) -> str:
        path = self.meta_dir / "cluster.json"
        if path.exists():
            return str(json.loads(path.read_text())["cluster_id"])
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        write_atomic(path, json.dumps({"cluster_id": cluster_id, "node_id": node_id}).encode())
        return cluster_id

    def open_partition(
        self, topic_id: Any, topic: str, index: int, config: LogConfig, now_ms: int, work: BlockingWork, *, new: bool
    ) -> Partition:
        return open_partition(self.data_dir / f"{topic}-{index}", config, now_ms, work, self.files)

    def discard_partition(self, topic_id: Any, topic: str, index: int) -> None:
        """What a partition that failed to open left behind goes, as a deleted one's does."""
        directory = self.data_dir / f"{topic}-{index}"
        if directory.exists():
            # Renamed now; the files go when the broker next starts (remove_deleted), off this path.
            directory.rename(directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETED_SUFFIX}"))

    def sync(self, pending: list[FlushItem]) -> None:
        sync_all(native_items(pending))

    def drop_partition(self, topic_id: Any, index: int, work: BlockingWork) -> None:
        """Never called: alone, this broker leads every partition."""

    def committed_decisions(self, producer_ids: list[int]) -> dict[int, int]:
        """Never asked: this process writes every marker of its logs itself."""
        return {}

    def close(self) -> None:
        pass
