"""Share groups (KIP-932, "queues for Kafka"): membership, share-partition state, the durable log."""

from .config import ShareConfig
from .coordinator import ShareCoordinator, ShareHeartbeat, ShareHeartbeatResult
from .leaders import LeaderShares
from .partition import AckType, Acquired, InvalidRecordState, LogSpan, RecordState, SharePartition

__all__ = [
    "Acquired", "AckType", "InvalidRecordState", "LeaderShares", "LogSpan", "RecordState", "ShareConfig", "ShareCoordinator",
    "ShareHeartbeat", "ShareHeartbeatResult", "SharePartition", "SharePartitions",
]

SharePartitions = ShareCoordinator | LeaderShares  # who keeps a member's share partitions here
