"""Share groups (KIP-932, "queues for Kafka"): membership, share-partition state, the durable log."""

from .config import ShareConfig
from .coordinator import ShareCoordinator, ShareHeartbeat, ShareHeartbeatResult
from .partition import AckType, Acquired, InvalidRecordState, LogSpan, RecordState, SharePartition

__all__ = [
    "Acquired", "AckType", "InvalidRecordState", "LogSpan", "RecordState", "ShareConfig", "ShareCoordinator",
    "ShareHeartbeat", "ShareHeartbeatResult", "SharePartition",
]
